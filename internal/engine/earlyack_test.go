package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// countingStore counts the store calls an acknowledgement can make.
type countingStore struct {
	ledger.Store
	calls atomic.Int64
}

func (s *countingStore) DeliveryGet(ctx context.Context, id string) (ledger.Delivery, error) {
	s.calls.Add(1)
	return s.Store.DeliveryGet(ctx, id)
}

func (s *countingStore) AckRecord(ctx context.Context, p *ledger.AckRecordParams) (ledger.AckResult, error) {
	s.calls.Add(1)
	return s.Store.AckRecord(ctx, p)
}

func (s *countingStore) AckHold(ctx context.Context, p *ledger.AckRecordParams) (ledger.Delivery, error) {
	s.calls.Add(1)
	return s.Store.AckHold(ctx, p)
}

// TestEarlyAckIsHeldNotPolled: a receiver that acknowledges from inside
// its handler, before it answers the attempt, holds the attempt open, so
// the attempt cannot be recorded until the acknowledgement is answered.
// The acknowledgement, served by another replica (an engine that sends
// nothing), is answered at once with the delivery still in flight and a
// fixed number of store calls; once the receiver answers, the sending
// engine records the 2xx and applies the held acknowledgement: processed
// delivers, rejected exhausts with AckRejected. A held acknowledgement of
// an attempt that then fails is dropped: the retry waits for its own.
func TestEarlyAckIsHeldNotPolled(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := sf.open(t)
			notices := make(chan engine.ExhaustedNotice, 10)
			sender := run(t, engine.Options{Store: store, SweepInterval: 5 * time.Millisecond,
				OnExhausted: func(n engine.ExhaustedNotice) { notices <- n }})
			counted := &countingStore{Store: store}
			replica, err := engine.New(engine.Options{Store: counted}) // serves the API only: never Run
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(replica.Close)
			api, err := httpapi.New(httpapi.Config{Publisher: replica, Reader: store, Auth: httpapi.StaticTokens{}, Acknowledger: replica})
			if err != nil {
				t.Fatal(err)
			}
			apiSrv := httptest.NewServer(api)
			t.Cleanup(apiSrv.Close)

			secret, err := signing.GenerateSecret()
			if err != nil {
				t.Fatal(err)
			}
			answers := make(chan ackAnswer, 10)
			var attempts atomic.Int64
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := attempts.Add(1)
				outcome := r.URL.Query().Get("outcome")
				if outcome != "" && (r.URL.Query().Get("fail") == "" || n == 1) {
					// Synchronous: the attempt stays open until the ack is answered.
					answers <- postAck(apiSrv.URL, secret, r.Header.Get(dispatch.DeliveryIDHeader), outcome, counted)
				}
				if r.URL.Query().Get("fail") != "" && n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			}))
			t.Cleanup(rcv.Close)

			registerCallback(t, sender, "early", "processed", rcv.URL+"/?outcome=processed", secret, time.Hour)
			registerCallback(t, sender, "early", "rejected", rcv.URL+"/?outcome=rejected", secret, time.Hour)
			registerCallback(t, sender, "early", "failed", rcv.URL+"/?outcome=processed&fail=1", secret, 50*time.Millisecond)

			heldAtOnce := func(d ledger.Delivery) {
				t.Helper()
				a := <-answers
				// AckSecrets reads the delivery once; AckRecord, AckHold.
				if a.code != http.StatusOK || a.body.DeliveryID != d.ID || a.body.State != string(ledger.StateInFlight) || a.calls != 3 {
					t.Fatalf("early ack answered %d %+v after %d store calls; want 200 in_flight after 3", a.code, a.body, a.calls)
				}
			}

			processed := publish(t, sender, "early", "order.processed", `{}`).Deliveries[0]
			heldAtOnce(processed)
			eventually(t, "the held processed ack to be applied", func() bool {
				d, err := store.DeliveryGet(ctx, processed.ID)
				return err == nil && d.State == ledger.StateDelivered
			})

			rejected := publish(t, sender, "early", "order.rejected", `{}`).Deliveries[0]
			heldAtOnce(rejected)
			if n := <-notices; n.Delivery.ID != rejected.ID || n.Delivery.ExhaustReason != ledger.ExhaustAckRejected || n.Delivery.Attempts != 1 {
				t.Fatalf("rejection notice = %+v, want AckRejected after 1 attempt", n.Delivery)
			}

			attempts.Store(0)
			failed := publish(t, sender, "early", "order.failed", `{}`).Deliveries[0]
			heldAtOnce(failed)
			if n := <-notices; n.Delivery.ID != failed.ID || n.Delivery.ExhaustReason != ledger.ExhaustAckTimeout || n.Delivery.Attempts != 2 {
				t.Fatalf("notice = %+v, want AckTimeout after 2 attempts: the ack held for the failed first attempt must not complete the retry", n.Delivery)
			}
		})
	}
}

// ackAnswer is an acknowledgement's answer and the store calls it cost.
type ackAnswer struct {
	code  int
	body  httpapi.AckAnswer
	calls int64
}

// postAck posts a signed acknowledgement of delivery as the receiver
// would and returns the answer (code 0 when the request failed) with the
// store calls it cost (when counted is not nil).
func postAck(apiURL string, secret sensitive.Bytes, delivery, outcome string, counted *countingStore) (a ackAnswer) {
	body := []byte(fmt.Sprintf(`{"deliveryID":%q,"outcome":%q,"reason":"order unknown"}`, delivery, outcome))
	now := time.Now()
	sig, err := signing.Sign(secret, "ack_"+delivery, now, body)
	if err != nil {
		return a
	}
	req, err := http.NewRequest(http.MethodPost, apiURL+"/v1/acks/"+delivery, bytes.NewReader(body))
	if err != nil {
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signing.HeaderID, "ack_"+delivery)
	req.Header.Set(signing.HeaderTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(signing.HeaderSignature, sig)
	var before int64
	if counted != nil {
		before = counted.calls.Load()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a
	}
	defer resp.Body.Close()
	a.code = resp.StatusCode
	if counted != nil {
		a.calls = counted.calls.Load() - before
	}
	_ = json.NewDecoder(resp.Body).Decode(&a.body)
	return a
}

// registerCallback registers a Callback-mode endpoint of e signed with
// secret, taking events of type "order.<name>", at most 2 attempts.
func registerCallback(t *testing.T, e *engine.Engine, ns, name, url string, secret sensitive.Bytes, ackTimeout time.Duration) {
	t.Helper()
	ep := endpoint(t, ns, name, url, []string{"order." + name}, policy(2, 5*time.Millisecond))
	ep.Secrets = []ledger.SigningSecret{{Value: secret}}
	ep.AckMode, ep.AckTimeout = ledger.AckCallback, ackTimeout
	if _, err := e.RegisterEndpoint(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
}
