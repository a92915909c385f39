package engine_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// TestCallbackAcknowledgements runs Callback-mode endpoints through the
// real engine, the real ack API and both stores: a 2xx only accepts; a
// signed "processed" ack delivers; a signed rejection exhausts with
// AckRejected; silence until the deadline is a failed attempt that is
// retried and finally exhausted with AckTimeout.
func TestCallbackAcknowledgements(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := sf.open(t)
			notices := make(chan engine.ExhaustedNotice, 10)
			reg := prometheus.NewPedanticRegistry()
			e := run(t, engine.Options{Store: store, SweepInterval: 5 * time.Millisecond, Metrics: engine.NewMetrics(reg, store),
				OnExhausted: func(n engine.ExhaustedNotice) { notices <- n }})
			api, err := httpapi.New(httpapi.Config{Publisher: e, Reader: store, Auth: httpapi.StaticTokens{}, Acknowledger: e})
			if err != nil {
				t.Fatal(err)
			}
			apiSrv := httptest.NewServer(api)
			t.Cleanup(apiSrv.Close)

			secret, err := signing.GenerateSecret()
			if err != nil {
				t.Fatal(err)
			}
			// The receiver accepts with 202 and, for "answer" events,
			// posts a signed acknowledgement with the outcome in the event.
			acks := make(chan int, 10)
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusAccepted)
				outcome := r.URL.Query().Get("outcome")
				if outcome == "" {
					return
				}
				delivery := r.Header.Get(dispatch.DeliveryIDHeader)
				go func() { acks <- postAck(apiSrv.URL, secret, delivery, outcome, nil).code }()
			}))
			t.Cleanup(rcv.Close)

			registerCallback(t, e, "cb", "processed", rcv.URL+"/?outcome=processed", secret, time.Hour)
			registerCallback(t, e, "cb", "rejected", rcv.URL+"/?outcome=rejected", secret, time.Hour)
			registerCallback(t, e, "cb", "silent", rcv.URL+"/?", secret, 20*time.Millisecond)

			publish(t, e, "cb", "order.processed", `{}`)
			eventually(t, "the processed ack", func() bool {
				s, _ := e.EndpointStats(ctx, "cb/processed")
				return s.Delivered == 1 && s.AwaitingAck == 0
			})
			if code := <-acks; code != http.StatusOK {
				t.Fatalf("processed ack answered %d", code)
			}

			rejected := publish(t, e, "cb", "order.rejected", `{}`)
			n := <-notices
			if n.Delivery.ID != rejected.Deliveries[0].ID || n.Delivery.ExhaustReason != ledger.ExhaustAckRejected || n.Delivery.LastError == "" {
				t.Fatalf("rejection notice = %+v", n.Delivery)
			}
			if s, _ := e.EndpointStats(ctx, "cb/rejected"); s.Delivered != 0 || s.ExhaustedUnresolved != 1 {
				t.Fatalf("a rejected event counted as delivered: %+v", s)
			}
			if code := <-acks; code != http.StatusOK {
				t.Fatalf("rejection answered %d", code)
			}

			silent := publish(t, e, "cb", "order.silent", `{}`)
			n = <-notices
			if n.Delivery.ID != silent.Deliveries[0].ID || n.Delivery.ExhaustReason != ledger.ExhaustAckTimeout || n.Delivery.Attempts != 2 {
				t.Fatalf("timeout notice = %+v, want AckTimeout after 2 attempts", n.Delivery)
			}

			// Exhaustions that no attempt ended are counted all the same.
			want := `
# HELP hookkeeper_deliveries_exhausted_total Deliveries given up on, by reason (MaxAttempts, MaxAge, NonRetryable, Gone, AckRejected, AckTimeout) and the endpoint's owner (spec.owner; at most 64 owners per process, later ones as _other), counted once committed.
# TYPE hookkeeper_deliveries_exhausted_total counter
hookkeeper_deliveries_exhausted_total{owner="",reason="AckRejected"} 1
hookkeeper_deliveries_exhausted_total{owner="",reason="AckTimeout"} 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hookkeeper_deliveries_exhausted_total"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAckSecretsFollowTheLedger: a replica that did not register an
// endpoint (with several replicas, only the leader's controller does)
// checks acknowledgements against the secrets in the ledger, not against
// the copy it cached before a rotation: the new secret is accepted at once
// and a retired one no longer is.
func TestAckSecretsFollowTheLedger(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := sf.open(t)
			leader := run(t, engine.Options{Store: store})
			follower := run(t, engine.Options{Store: store})

			ep := endpoint(t, "rot", "orders", "https://receiver.example/", []string{"order.created"}, policy(2, time.Second))
			ep.AckMode, ep.AckTimeout, ep.Paused = ledger.AckCallback, time.Hour, true // nothing is sent
			old := ep.Secrets[0].Value
			if _, err := leader.RegisterEndpoint(ctx, ep); err != nil {
				t.Fatal(err)
			}
			d := publish(t, leader, "rot", "order.created", `{}`).Deliveries[0]

			got, err := follower.AckSecrets(ctx, d.ID)
			if err != nil || len(got) != 1 || !bytes.Equal(got[0], old) {
				t.Fatalf("before the rotation: AckSecrets = %d secrets, %v; want the first secret", len(got), err)
			}

			rotated, err := signing.GenerateSecret()
			if err != nil {
				t.Fatal(err)
			}
			ep.Secrets = []ledger.SigningSecret{{Value: rotated}}
			if _, err := leader.RegisterEndpoint(ctx, ep); err != nil {
				t.Fatal(err)
			}
			got, err = follower.AckSecrets(ctx, d.ID)
			if err != nil || len(got) != 1 || !bytes.Equal(got[0], []byte(rotated)) {
				t.Fatalf("after the rotation: AckSecrets = %d secrets (first is the retired one: %v), %v; want only the new secret",
					len(got), len(got) > 0 && bytes.Equal(got[0], old), err)
			}
		})
	}
}
