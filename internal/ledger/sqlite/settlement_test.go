package sqlite_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// token returns a distinctive value: prefix + 32 random hex digits.
func token(t *testing.T, prefix string) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// onDisk reports which files of the ledger in dir (the database, its WAL
// and shared memory, anything else SQLite left there) contain value.
func onDisk(t *testing.T, dir, value string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(value)) {
			found = append(found, e.Name())
		}
	}
	return found
}

// TestScrubbedSecretsLeaveTheFiles proves lesson 3 on the bytes: once an
// event's last delivery ends, its secret value is no longer in the
// database file nor in the WAL after Compact, while the secret of an event
// still pending is (so the search does find what is there).
func TestScrubbedSecretsLeaveTheFiles(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "ledger.db"))
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{
		Endpoint: ledger.Endpoint{ID: "shop/all", Namespace: "shop", Name: "all", URL: "https://r.example", EventTypes: []string{"order.*"}},
		Now:      now,
	}); err != nil {
		t.Fatalf("EndpointUpsert: %v", err)
	}
	scrubbed, pending := token(t, "tok_"), token(t, "tok_")
	publish := func(typ, secret string, at time.Time) ledger.EventInsertResult {
		t.Helper()
		data := json.RawMessage(`{"order":1}`)
		res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{{
			ID: ledger.NewID("evt", at), Namespace: "shop", Type: typ, Data: data,
			Secrets: sensitive.Bytes(`{"confirmToken":"` + secret + `"}`), SecretNames: []string{"confirmToken"}, Now: at,
		}})
		if err != nil || res[0].Err != nil || len(res[0].Deliveries) != 1 {
			t.Fatalf("EventInsertMany = %+v, %v", res, err)
		}
		return res[0]
	}
	ev := publish("order.created", scrubbed, now)
	kept := publish("order.updated", pending, now.Add(time.Hour)) // not due yet

	// Committed secrets are on disk (in the WAL until a checkpoint): the
	// search below would find them.
	if err := s.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	for _, secret := range []string{scrubbed, pending} {
		if files := onDisk(t, dir, secret); len(files) == 0 {
			t.Fatalf("secret %s not found on disk before the scrub: the search cannot fail", secret)
		}
	}

	claimed, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: now, LeaseFor: time.Minute, Limit: 10})
	if err != nil || len(claimed) != 1 || claimed[0].Event.ID != ev.Event.ID {
		t.Fatalf("DeliveryClaim = %+v, %v", claimed, err)
	}
	res, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{{
		DeliveryID: claimed[0].Delivery.ID, Owner: "w", Now: now.Add(time.Second),
		Attempt: ledger.Attempt{StartedAt: now, Duration: time.Second, StatusCode: 204},
		Next:    ledger.Next{State: ledger.StateDelivered},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("AttemptRecordMany = %+v, %v", res, err)
	}
	got, err := s.EventGet(ctx, ev.Event.ID)
	if err != nil {
		t.Fatalf("EventGet: %v", err)
	}
	if got.Secrets != nil || got.SecretsScrubAt == nil || len(got.SecretNames) != 1 {
		t.Errorf("event after its delivery: secrets %q, SecretsScrubAt %v, names %v", got.Secrets.Reveal(), got.SecretsScrubAt, got.SecretNames)
	}
	// Before Compact the WAL still holds the page as it was.
	if files := onDisk(t, dir, scrubbed); len(files) == 0 {
		t.Log("the scrubbed secret already left the files before Compact")
	} else {
		t.Logf("before Compact the scrubbed secret is still in %v", files)
	}

	if err := s.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if files := onDisk(t, dir, scrubbed); len(files) != 0 {
		t.Fatalf("scrubbed secret %s is still in %v after Compact", scrubbed, files)
	}
	if files := onDisk(t, dir, pending); len(files) == 0 {
		t.Fatalf("secret %s of a pending event is gone from disk: the search is blind", pending)
	}
	if got, err := s.EventGet(ctx, kept.Event.ID); err != nil || !bytes.Contains(got.Secrets.Reveal(), []byte(pending)) {
		t.Fatalf("pending event's secrets: %v", err)
	}
	if info, err := os.Stat(filepath.Join(dir, "ledger.db-wal")); err == nil && info.Size() != 0 {
		t.Fatalf("WAL is %d bytes after Compact, want it truncated", info.Size())
	}
}

// TestPrunedPayloadsLeaveTheFiles checks the same for retention: a pruned
// payload and a deleted event's idempotency key are gone from the files
// after Compact.
func TestPrunedPayloadsLeaveTheFiles(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "ledger.db"))
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ep := ledger.Endpoint{ID: "shop/all", Namespace: "shop", Name: "all", URL: "https://r.example", EventTypes: []string{"*"}}
	ep.Policy.PayloadRetention, ep.Policy.EvidenceRetention = time.Hour, 2*time.Hour
	if _, err := s.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Endpoint: ep, Now: now}); err != nil {
		t.Fatalf("EndpointUpsert: %v", err)
	}
	payload, key, excerpt := token(t, "pay_"), token(t, "key_"), token(t, "resp_")
	res, err := s.EventInsertMany(ctx, []*ledger.EventInsertParams{{
		ID: ledger.NewID("evt", now), Namespace: "shop", Type: "order.created",
		Data: json.RawMessage(`{"note":"` + payload + `"}`), IdempotencyKey: key, BodyHash: []byte{1}, Now: now,
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("EventInsertMany = %+v, %v", res, err)
	}
	if _, err := s.DeliveryClaim(ctx, &ledger.DeliveryClaimParams{Owner: "w", Now: now, LeaseFor: time.Minute, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AttemptRecordMany(ctx, []*ledger.AttemptRecordParams{{
		DeliveryID: res[0].Deliveries[0].ID, Owner: "w", Now: now,
		Attempt: ledger.Attempt{StartedAt: now, StatusCode: 200, ResponseExcerpt: []byte(excerpt)},
		Next:    ledger.Next{State: ledger.StateDelivered},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	for _, v := range []string{payload, key, excerpt} {
		if len(onDisk(t, dir, v)) == 0 {
			t.Fatalf("%s not on disk before pruning: the search cannot fail", v)
		}
	}
	prune := func(at time.Time, want ledger.PruneResult) {
		t.Helper()
		got, err := s.Prune(ctx, &ledger.PruneParams{Now: at, DefaultPayloadRetention: time.Hour, DefaultEvidenceRetention: 2 * time.Hour})
		if err != nil || got != want {
			t.Fatalf("Prune = %+v, %v; want %+v", got, err, want)
		}
		if err := s.Compact(ctx); err != nil {
			t.Fatalf("Compact: %v", err)
		}
	}
	prune(now.Add(time.Hour), ledger.PruneResult{PayloadsPruned: 1})
	for _, v := range []string{payload, excerpt} {
		if files := onDisk(t, dir, v); len(files) != 0 {
			t.Fatalf("pruned %s still in %v", v, files)
		}
	}
	if len(onDisk(t, dir, key)) == 0 {
		t.Fatal("the idempotency key left with the payload; it is evidence")
	}
	prune(now.Add(2*time.Hour), ledger.PruneResult{EventsDeleted: 1})
	if files := onDisk(t, dir, key); len(files) != 0 {
		t.Fatalf("deleted event's key still in %v", files)
	}
}
