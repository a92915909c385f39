#!/usr/bin/env bash
# `make demo`: the whole story on a local control plane with the real
# kubectl. Each step prints its command and output and checks what it
# shows; the script exits 0 only when every step behaved as described.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DEV_DIR="$ROOT/.dev/demo"
rm -rf "$DEV_DIR" && mkdir -p "$DEV_DIR/secrets"
ASSETS="$(./hack/controlplane.sh)"
export KUBEBUILDER_ASSETS="$ASSETS"
KUBECTL="$ASSETS/kubectl"
API=http://127.0.0.1:18090

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*" | sed "s#$KUBECTL#kubectl#"; "$@"; }
fail() { printf '\033[31mdemo failed: %s\033[0m\n' "$*" >&2; echo "--- operator log" >&2; tail -40 "$DEV_DIR/manager.log" >&2; exit 1; }
expect() { # expect <description> <actual> <wanted>
	[[ "$2" == "$3" ]] || fail "$1: got '$2', want '$3'"
	printf '  \033[32mok\033[0m %s: %s\n' "$1" "$2"
}
k() { "$KUBECTL" --namespace demo "$@"; }
publish() {
	curl -sS -X POST "$API/v1/namespaces/demo/events" -H "Authorization: Bearer $TOKEN" \
		-H 'Content-Type: application/json' -H "Idempotency-Key: $1" -d "$2"
	echo
}

say "building and starting a local control plane, the operator and the demo receivers"
go build -o bin/manager ./cmd
go build -o bin/devcluster ./hack/devcluster
go build -o bin/demoreceiver ./hack/demoreceiver
go build -o bin/examplereceiver ./hack/examplereceiver
# devcluster: etcd, kube-apiserver and kube-controllers, and the route from
# kube-apiserver to the manager's aggregated API on 127.0.0.1:18443.
bin/devcluster --dir "$DEV_DIR" --delivery-api 127.0.0.1:18443 >"$DEV_DIR/cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
	[[ -f "$DEV_DIR/cluster.ready" ]] && break
	kill -0 "${pids[0]}" 2>/dev/null || break
	sleep 0.5
done
[[ -f "$DEV_DIR/cluster.ready" ]] || { tail -40 "$DEV_DIR/cluster.log" >&2; fail "the control plane did not start (see $DEV_DIR/cluster.log)"; }
export KUBECONFIG="$DEV_DIR/kubeconfig"
TOKEN="demo-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$TOKEN demo-producer" >"$DEV_DIR/api-tokens"
bin/manager --ledger="sqlite://$DEV_DIR/ledger.db" --metrics-bind-address=0 \
	--health-probe-bind-address=127.0.0.1:18081 --api-bind-address=127.0.0.1:18090 \
	--api-auth=token-file --api-token-file="$DEV_DIR/api-tokens" --allowed-destination-cidrs=127.0.0.0/8 \
	--aggregated-api-bind-address=127.0.0.1:18443 \
	--aggregated-api-tls-cert-file="$DEV_DIR/delivery-api.crt" --aggregated-api-tls-key-file="$DEV_DIR/delivery-api.key" \
	--endpoint-activity-interval=1s --policy-evidence-resync=2s \
	>"$DEV_DIR/manager.log" 2>&1 &
pids+=($!)
bin/demoreceiver --listen 127.0.0.1:18100 --api "$API" --token "$TOKEN" --secret-dir "$DEV_DIR/secrets" >"$DEV_DIR/receiver.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1 && break; sleep 0.5; done
# As in a cluster, kube-apiserver proxies delivery.hookkeeper.dev to the
# manager through the APIService, so `kubectl get deliveries` below uses the
# ordinary kubeconfig. devcluster registered it with an ExternalName Service
# for 127.0.0.1 (Endpoints on loopback are refused, an ExternalName is not)
# and the CA of the certificate the manager serves; kube-apiserver presents
# its front-proxy client certificate, and the manager delegates
# authentication and authorization back to it.
show "$KUBECTL" wait apiservice/v1alpha1.delivery.hookkeeper.dev --for=condition=Available --timeout=60s \
	|| fail "kube-apiserver does not reach the manager's aggregated API: $("$KUBECTL" get apiservice v1alpha1.delivery.hookkeeper.dev -o jsonpath='{.status.conditions[0].message}')"

say "1. an admin applies a retry policy and three endpoints"
show "$KUBECTL" apply -f hack/demo/manifests.yaml
show "$KUBECTL" wait --namespace demo --for=condition=Ready webhookendpoint --all --timeout=60s
# The receivers verify signatures with the Secrets hookkeeper generated.
for pair in fan-confirmations:confirmations producer:producer n8n:n8n; do
	name="$(k get webhookendpoint "${pair%%:*}" -o jsonpath='{.status.signingSecretName}')"
	k get secret "$name" -o jsonpath='{.data.signingSecret}' | base64 -d >"$DEV_DIR/secrets/${pair##*:}"
done
show "$KUBECTL" get --namespace demo hookkeeper

say "2. the producer publishes a confirmation with a one-time token; the receiver is down"
show publish confirm-fan-7 '{"type":"fan.confirmation_requested","data":{"fan":7},"secrets":{"confirmToken":"tok_original_0001"}}'
show "$KUBECTL" wait --namespace demo --for=condition=DeliveriesExhausted webhookendpoint/fan-confirmations --timeout=60s
show "$KUBECTL" get --namespace demo webhookendpoint fan-confirmations
expect "exhausted deliveries on kubectl get" "$(k get webhookendpoint fan-confirmations -o jsonpath='{.status.deliveries.exhaustedUnresolved}')" 1
show "$KUBECTL" get --namespace demo webhookendpoint fan-confirmations -o jsonpath='{.status.conditions[?(@.type=="DeliveriesExhausted")].message}{"\n"}'
MESSAGE="$(k get webhookendpoint fan-confirmations -o jsonpath='{.status.conditions[?(@.type=="DeliveriesExhausted")].message}')"
expect "the message names the endpoint's owner" "${MESSAGE##*. }" "Owner: team-fans"
EVENT="$(k get webhookendpoint fan-confirmations -o jsonpath='{.status.recentExhausted[0].eventID}')"
expect "a reissue is required for it" "$(k get webhookendpoint fan-confirmations -o jsonpath='{.status.recentExhausted[0].recovery}')" Reissue

say "3. the delivery's history in kubectl; the one-time token was scrubbed when nothing was pending any more"
show "$KUBECTL" get deliveries --namespace demo --field-selector spec.endpoint=fan-confirmations,status.state=Exhausted
DELIVERY="$(k get deliveries --field-selector "spec.event=$EVENT" -o jsonpath='{.items[0].metadata.name}')"
show "$KUBECTL" describe delivery --namespace demo "$DELIVERY"
show "$KUBECTL" get webhookevent --namespace demo "$EVENT" -o yaml
[[ -n "$(k get webhookevent "$EVENT" -o jsonpath='{.status.secretsScrubbedAt}')" ]] || fail "the event's secrets were not scrubbed"
printf '  \033[32mok\033[0m secrets scrubbed at %s\n' "$(k get webhookevent "$EVENT" -o jsonpath='{.status.secretsScrubbedAt}')"
curl -sS -X POST "http://127.0.0.1:18100/control/outage?on=false"

say "4. a Retry is refused: it could only deliver a token that no longer exists"
show "$KUBECTL" apply -f hack/demo/retry.yaml
show "$KUBECTL" wait --namespace demo --for=condition=Complete deliveryrecovery/retry-confirmations --timeout=60s
show "$KUBECTL" get --namespace demo deliveryrecovery retry-confirmations
expect "ReissueRequired" "$(k get deliveryrecovery retry-confirmations -o jsonpath='{.status.conditions[?(@.type=="ReissueRequired")].status}')" True
expect "refused items" "$(k get deliveryrecovery retry-confirmations -o jsonpath='{.status.counts.refused}')" 1

say "5. an Auto recovery reissues: the producer mints a fresh token under a new event id"
show "$KUBECTL" apply -f hack/demo/auto.yaml
show "$KUBECTL" wait --namespace demo --for=condition=Complete deliveryrecovery/recover-confirmations --timeout=60s
show "$KUBECTL" get --namespace demo deliveryrecovery recover-confirmations
expect "reissued" "$(k get deliveryrecovery recover-confirmations -o jsonpath='{.status.counts.reissued}')" 1
expect "delivered after the recovery" "$(k get deliveryrecovery recover-confirmations -o jsonpath='{.status.counts.delivered}')" 1
NEW_EVENT="$(k get deliveryrecovery recover-confirmations -o jsonpath='{.status.items[0].newEventID}')"
[[ -n "$NEW_EVENT" && "$NEW_EVENT" != "$EVENT" ]] || fail "the replacement must have a new event id (old $EVENT, new $NEW_EVENT)"
show curl -sS http://127.0.0.1:18100/control/log
LAST="$(curl -sS http://127.0.0.1:18100/control/log | tr '}' '\n' | grep "$NEW_EVENT" | tail -1)"
[[ "$LAST" == *'"status":204'* && "$LAST" != *tok_original_0001* && "$LAST" == *tok_* ]] || fail "the replacement was not delivered with a fresh token: $LAST"
printf '  \033[32mok\033[0m replacement %s delivered with a fresh token\n' "$NEW_EVENT"
show "$KUBECTL" get deliveries --namespace demo -o wide
expect "the original keeps its history and gains a resolution" \
	"$(k get deliveries --field-selector "spec.event=$EVENT" -o jsonpath='{.items[0].status.resolution}')" Reissued
expect "the replacement is named on the original" \
	"$(k get deliveries --field-selector "spec.event=$EVENT" -o jsonpath='{.items[0].status.replacedBy.event}')" "$NEW_EVENT"

say "6. a Callback endpoint: accepted (202) but rejected by the workflow is not delivered"
show publish order-1001 '{"type":"order.created","data":{"order":1001}}'
show "$KUBECTL" wait --namespace demo --for=condition=DeliveriesExhausted webhookendpoint/n8n --timeout=60s
show "$KUBECTL" get --namespace demo webhookendpoint n8n
expect "delivered" "$(k get webhookendpoint n8n -o jsonpath='{.status.deliveries.delivered}')" 0
expect "exhausted reason" "$(k get webhookendpoint n8n -o jsonpath='{.status.recentExhausted[0].reason}')" AckRejected

say "7. a receiver built with pkg/receiver: a replayed delivery is recognised and leaves one row"
show "$KUBECTL" apply -f hack/demo/bookkeeping.yaml
show "$KUBECTL" wait --namespace demo --for=condition=Ready webhookendpoint/bookkeeping --timeout=60s
k get secret "$(k get webhookendpoint bookkeeping -o jsonpath='{.status.signingSecretName}')" -o jsonpath='{.data.signingSecret}' | base64 -d >"$DEV_DIR/secrets/bookkeeping"
# hack/examplereceiver: verifies, de-duplicates on webhook-id in its own
# SQLite database, books one row per event in the same transaction.
bin/examplereceiver --listen 127.0.0.1:18101 --db "$DEV_DIR/bookkeeping.db" --secret-file "$DEV_DIR/secrets/bookkeeping" >"$DEV_DIR/bookkeeping.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do curl -fsS http://127.0.0.1:18101/rows >/dev/null 2>&1 && break; sleep 0.5; done
SINCE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
INVOICE='{"type":"invoice.paid","data":{"invoice":42,"amount":"129.00"}}'
printf '$ publish invoice-42 %s\n' "$INVOICE"
ANSWER="$(publish invoice-42 "$INVOICE")" && echo "$ANSWER"
INVOICE_EVENT="$(grep -o '"id":"[^"]*"' <<<"$ANSWER" | head -1 | cut -d'"' -f4)"
show "$KUBECTL" wait --namespace demo --for=jsonpath='{.status.deliveries.delivered}'=1 webhookendpoint/bookkeeping --timeout=60s
sed "s/SINCE/$SINCE/" hack/demo/replay.yaml >"$DEV_DIR/replay.yaml"
show "$KUBECTL" apply -f "$DEV_DIR/replay.yaml"
show "$KUBECTL" wait --namespace demo --for=condition=Complete deliveryrecovery/replay-invoices --timeout=60s
show "$KUBECTL" get --namespace demo deliveryrecovery replay-invoices
expect "replayed and delivered under the same webhook-id" \
	"$(k get deliveryrecovery replay-invoices -o jsonpath='{.status.counts.replayed} {.status.counts.delivered}')" "1 1"
printf '$ grep %s %s\n' "$INVOICE_EVENT" "bookkeeping.log  # the receiver's log"
grep -o "\(processed\|duplicate\) $INVOICE_EVENT.*" "$DEV_DIR/bookkeeping.log" || true
expect "the receiver recognised the replay" "$(grep -c "duplicate $INVOICE_EVENT" "$DEV_DIR/bookkeeping.log")" 1
show curl -sS http://127.0.0.1:18101/rows
expect "booked rows for the event" "$(curl -sS http://127.0.0.1:18101/rows | grep -o "\"webhookID\":\"$INVOICE_EVENT\"" | wc -l | tr -d ' ')" 1

say "8. what the policy achieved in this story, from the ledger's evidence (refreshed on the status resync)"
# Settled: the confirmation exhausted while the receiver was down, the
# reissue request and its replacement delivered, the order rejected by the
# workflow (the invoice of step 7 has a policy of its own).
show "$KUBECTL" wait --namespace demo --for=jsonpath='{.status.evidence.last24h.settled}'=4 retrypolicy/demo-fast --timeout=60s
show "$KUBECTL" get --namespace demo retrypolicy demo-fast
show "$KUBECTL" get --namespace demo webhookendpoint -o wide
printf '$ kubectl describe --namespace demo retrypolicy demo-fast  # from Status on\n'
k describe retrypolicy demo-fast | sed -n '/^Status:/,$p'
expect "delivered on the first attempt" "$(k get retrypolicy demo-fast -o jsonpath='{.status.evidence.last24h.firstTry}')" 50%
expect "exhausted, by reason" "$(k get retrypolicy demo-fast -o jsonpath='{range .status.evidence.last24h.exhaustedByReason[*]}{.reason}={.count} {end}')" "AckRejected=1 MaxAttempts=1 "
expect "recovered by a retry" "$(k get retrypolicy demo-fast -o jsonpath='{.status.evidence.last24h.recovered}')" 0
expect "the advice" "$(k get retrypolicy demo-fast -o jsonpath='{.status.conditions[?(@.type=="HorizonFit")].reason}')" InsufficientEvidence

say "9. deleting the namespace completes: kube-controllers' namespace controller, the manager's finalizers"
# The namespace controller walks every resource discovery lists, the
# aggregated delivery.hookkeeper.dev included: the manager serves it until
# the end, so nothing waits for an unavailable APIService.
show "$KUBECTL" delete namespace demo --wait --timeout=120s
expect "the namespace is gone" "$("$KUBECTL" get namespace demo --ignore-not-found -o name)" ""

say "the demo behaved as shown"
