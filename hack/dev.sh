#!/usr/bin/env bash
# `make dev`: a local control plane (etcd, kube-apiserver, kube-controllers),
# the operator against it with its aggregated API routed through
# kube-apiserver on loopback, and the samples applied, then the kubectl
# commands to try. Ctrl-C stops it all.
# DEV_ONESHOT=1 stops after showing the samples (used to check this script).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DEV_DIR="$ROOT/.dev"
ASSETS="$(./hack/controlplane.sh)"
KUBECTL="$ASSETS/kubectl"
export KUBEBUILDER_ASSETS="$ASSETS"
mkdir -p "$DEV_DIR"

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

say "starting etcd, kube-apiserver and kube-controllers (logs: .dev/cluster.log, .dev/kube-controllers.log)"
go build -o "$ROOT/bin/devcluster" ./hack/devcluster
# --delivery-api: the route from kube-apiserver to the manager's aggregated
# API (an APIService with an ExternalName Service for 127.0.0.1).
"$ROOT/bin/devcluster" --dir "$DEV_DIR" --delivery-api 127.0.0.1:18443 >"$DEV_DIR/cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
	[[ -f "$DEV_DIR/cluster.ready" ]] && break
	kill -0 "${pids[0]}" 2>/dev/null || { cat "$DEV_DIR/cluster.log"; exit 1; }
	sleep 0.5
done
[[ -f "$DEV_DIR/cluster.ready" ]] || { echo "control plane did not start; see .dev/cluster.log" >&2; exit 1; }
export KUBECONFIG="$DEV_DIR/kubeconfig"

say "starting the operator (logs: .dev/manager.log)"
[[ -f "$DEV_DIR/api-tokens" ]] || echo "dev-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n') developer" >"$DEV_DIR/api-tokens"
TOKEN="$(cut -d' ' -f1 "$DEV_DIR/api-tokens")"
"$ROOT/bin/manager" --ledger="sqlite://$DEV_DIR/ledger.db" --metrics-bind-address=0 \
	--health-probe-bind-address=127.0.0.1:18081 --api-bind-address=127.0.0.1:18090 \
	--api-auth=token-file --api-token-file="$DEV_DIR/api-tokens" --allowed-destination-cidrs=127.0.0.0/8 \
	--aggregated-api-bind-address=127.0.0.1:18443 \
	--aggregated-api-tls-cert-file="$DEV_DIR/delivery-api.crt" --aggregated-api-tls-key-file="$DEV_DIR/delivery-api.key" \
	>"$DEV_DIR/manager.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
	curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1 && break
	kill -0 "${pids[1]}" 2>/dev/null || { cat "$DEV_DIR/manager.log"; exit 1; }
	sleep 0.5
done
show "$KUBECTL" wait apiservice/v1alpha1.delivery.hookkeeper.dev --for=condition=Available --timeout=60s

say "applying the samples"
show "$KUBECTL" apply -f config/samples
show "$KUBECTL" wait --for=condition=Ready retrypolicy --all --timeout=60s
say "what hookkeeper knows"
show "$KUBECTL" get retrypolicies
show "$KUBECTL" get hookkeeper
show "$KUBECTL" get deliveries -A

cat <<MSG

hookkeeper is running against a local control plane. In another shell:

  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$KUBECTL
  kubectl get hookkeeper
  kubectl get retrypolicy standard -o jsonpath='{.status.schedule}'; echo
  kubectl describe retrypolicy payments
  kubectl explain webhookendpoint.spec
  curl -sS -X POST http://127.0.0.1:18090/v1/namespaces/default/events \\
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \\
    -H 'Idempotency-Key: order-42' -d '{"type":"order.created","data":{"order":42}}'
  # the delivery history, served by the operator through kube-apiserver:
  kubectl get deliveries -A
  kubectl get webhookevents -A
  kubectl describe delivery <name> -n default

Operator log: .dev/manager.log. Press Ctrl-C to stop everything.
MSG

if [[ "${DEV_ONESHOT:-}" == "1" ]]; then
	exit 0
fi
wait "${pids[0]}"
