package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// TestCrowdRelayIncident replays the incident behind DESIGN.md lessons 2
// and 3 against the real engine and store: a fan's confirmation event
// carries a one-time token; the receiver is down until the delivery is
// exhausted and the token scrubbed; a Retry is refused because it could only
// deliver a token that no longer exists; a Reissue asks the producer for
// fresh material; the producer publishes a replacement with a new token;
// the replacement is delivered under a new webhook-id; and the original
// event and delivery are unchanged apart from their resolution.
func TestCrowdRelayIncident(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := sf.open(t)
			notices := make(chan engine.ExhaustedNotice, 10)
			var e *engine.Engine

			// The fan-confirmation receiver: down until fixed.
			var up atomic.Bool
			type receipt struct{ id, token string }
			var mu sync.Mutex
			var confirmations []receipt
			confirm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var env struct {
					Data map[string]any `json:"data"`
				}
				body, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(body, &env)
				tok, _ := env.Data["confirmToken"].(string)
				mu.Lock()
				confirmations = append(confirmations, receipt{r.Header.Get("webhook-id"), tok})
				mu.Unlock()
				if !up.Load() {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(confirm.Close)

			// The producer: on a reissue request it mints a new token and
			// publishes the replacement, linked to the original.
			requests := make(chan map[string]any, 10)
			producer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var env struct {
					Type string         `json:"type"`
					Data map[string]any `json:"data"`
				}
				body, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(body, &env)
				if env.Type != ledger.ReissueRequestedEventType {
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				orig, _ := env.Data["originalEventID"].(string)
				now := time.Now()
				res, err := e.Publish(r.Context(), &ledger.EventInsertParams{
					ID: ledger.NewID("evt", now), Namespace: "crowdrelay", Type: "fan.confirmation_requested",
					Data: json.RawMessage(`{"fan":7}`), Secrets: sensitive.Bytes(`{"confirmToken":"tok_NEW_c3f1"}`),
					SecretNames: []string{"confirmToken"}, ReissueOf: orig, Now: now,
				})
				if err != nil || res.Err != nil {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				requests <- env.Data
				w.WriteHeader(http.StatusNoContent)
			}))
			t.Cleanup(producer.Close)

			e = run(t, engine.Options{Store: store, OnExhausted: func(n engine.ExhaustedNotice) { notices <- n }, SweepInterval: 10 * time.Millisecond})
			p := policy(3, 5*time.Millisecond)
			p.ReplayWindow = time.Hour
			for _, ep := range []ledger.Endpoint{
				endpoint(t, "crowdrelay", "fan-confirmations", confirm.URL, []string{"fan.confirmation_requested"}, p),
				endpoint(t, "crowdrelay", "producer", producer.URL, []string{ledger.ReissueRequestedEventType}, policy(3, time.Millisecond)),
			} {
				if _, err := e.RegisterEndpoint(ctx, ep); err != nil {
					t.Fatal(err)
				}
			}

			// 1. The confirmation event, with its one-time token, exhausts.
			now := time.Now()
			orig, err := e.Publish(ctx, &ledger.EventInsertParams{
				ID: ledger.NewID("evt", now), Namespace: "crowdrelay", Type: "fan.confirmation_requested",
				Data: json.RawMessage(`{"fan":7}`), Secrets: sensitive.Bytes(`{"confirmToken":"tok_OLD_9a2b"}`),
				SecretNames: []string{"confirmToken"}, Now: now,
			})
			if err != nil || orig.Err != nil || len(orig.Deliveries) != 1 {
				t.Fatalf("publish: %v %v %+v", err, orig.Err, orig.Deliveries)
			}
			var exhausted ledger.Delivery
			select {
			case n := <-notices:
				exhausted = n.Delivery
			case <-time.After(30 * time.Second):
				t.Fatal("the confirmation was never exhausted")
			}
			if exhausted.Attempts != 3 || exhausted.ExhaustReason != ledger.ExhaustMaxAttempts {
				t.Fatalf("exhausted delivery = %+v", exhausted)
			}

			// 2. Its token is scrubbed; only the name remains.
			ev, err := store.EventGet(ctx, orig.Event.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Secrets != nil || ev.SecretsScrubAt == nil || len(ev.SecretNames) != 1 || ev.SecretNames[0] != "confirmToken" {
				t.Fatalf("after exhaustion the event still holds its secrets or lost their names: scrubbed=%v names=%v", ev.SecretsScrubAt, ev.SecretNames)
			}
			up.Store(true)

			// 3. A Retry is refused: it could only replay a dead token.
			retry, err := e.Recover(ctx, "op-retry", exhausted.ID, ledger.RecoveryRetry)
			if err != nil || retry.Outcome != ledger.OutcomeRefused || retry.Reason != ledger.RefusedReissueRequired {
				t.Fatalf("Retry = %+v, %v; want Refused/ReissueRequired", retry, err)
			}
			again, err := e.Recover(ctx, "op-retry", exhausted.ID, ledger.RecoveryRetry)
			if err != nil || !again.Replayed || again.Outcome != ledger.OutcomeRefused {
				t.Fatalf("repeated Retry = %+v, %v; want the recorded refusal", again, err)
			}

			// 4. A Reissue asks the producer for fresh material.
			reissue, err := e.Recover(ctx, "op-reissue", exhausted.ID, ledger.RecoveryReissue)
			if err != nil || reissue.Outcome != ledger.OutcomeAwaitingReissue {
				t.Fatalf("Reissue = %+v, %v; want AwaitingReissue", reissue, err)
			}
			var req map[string]any
			select {
			case req = <-requests:
			case <-time.After(30 * time.Second):
				t.Fatal("the producer never got the reissue request")
			}
			if req["originalEventID"] != orig.Event.ID || req["confirmToken"] != nil {
				t.Fatalf("reissue request data = %v", req)
			}

			// 5. The replacement is delivered under a new webhook-id with
			// the new token.
			eventually(t, "the replacement delivered", func() bool {
				items, err := e.RecoveryItems(ctx, "op-reissue")
				return err == nil && len(items) == 1 && items[0].Outcome == ledger.OutcomeReissued &&
					items[0].NewDeliveryState == ledger.StateDelivered
			})
			items, _ := e.RecoveryItems(ctx, "op-reissue")
			newEvent := items[0].NewEventID
			if newEvent == "" || newEvent == orig.Event.ID {
				t.Fatalf("the replacement's event id %q must be new", newEvent)
			}
			mu.Lock()
			last := confirmations[len(confirmations)-1]
			oldAttempts := 0
			for _, c := range confirmations {
				if c.id == orig.Event.ID {
					oldAttempts++
					if c.token != "tok_OLD_9a2b" {
						t.Errorf("an attempt of the original carried token %q", c.token)
					}
				}
			}
			mu.Unlock()
			if last.id != newEvent || last.token != "tok_NEW_c3f1" {
				t.Fatalf("last confirmation = %+v, want the replacement %s with the new token", last, newEvent)
			}
			if oldAttempts != 3 {
				t.Fatalf("the original was sent %d times, want its 3 attempts and no more", oldAttempts)
			}

			// 6. The original is unchanged apart from its resolution.
			d, err := store.DeliveryGet(ctx, exhausted.ID)
			if err != nil || d.State != ledger.StateExhausted || d.Attempts != 3 || d.Resolution != ledger.ResolutionReissued {
				t.Fatalf("original delivery = %+v, %v", d, err)
			}
			attempts, _ := store.AttemptList(ctx, exhausted.ID)
			if len(attempts) != 3 {
				t.Fatalf("original delivery has %d attempts, want 3", len(attempts))
			}
			ev2, _ := store.EventGet(ctx, orig.Event.ID)
			if ev2.Type != ev.Type || string(ev2.Data) != string(ev.Data) || ev2.ReissueOf != "" {
				t.Fatalf("original event changed: %+v", ev2)
			}
			replacement, _ := store.EventGet(ctx, newEvent)
			if replacement.ReissueOf != orig.Event.ID {
				t.Fatalf("replacement reissueOf = %q", replacement.ReissueOf)
			}

			// 7. Repeating the Reissue changes nothing.
			again, err = e.Recover(ctx, "op-reissue", exhausted.ID, ledger.RecoveryReissue)
			if err != nil || !again.Replayed {
				t.Fatalf("repeated Reissue = %+v, %v", again, err)
			}
			select {
			case r := <-requests:
				t.Fatalf("a repeated Reissue sent another request: %v", r)
			default:
			}
		})
	}
}
