package ledgertest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The Snapshot group: ledger.Snapshots, the last known state of Kubernetes
// objects. A put is an idempotent upsert that writes nothing when the
// document is unchanged; a delete of an unknown object is no error; a list
// returns one kind, by namespace then name.

func exerciseSnapshots(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"PutListDelete":             testSnapshotPutListDelete,
		"UnchangedPutWritesNothing": testSnapshotUnchanged,
		"InvalidPutRefused":         testSnapshotInvalid,
	})
}

func (f *fixture) putSnapshot(kind, ns, name, doc string, now time.Time) bool {
	f.t.Helper()
	changed, err := f.s.SnapshotPut(f.ctx, &ledger.Snapshot{Kind: kind, Namespace: ns, Name: name, Doc: []byte(doc), UpdatedAt: now})
	if err != nil {
		f.t.Fatalf("SnapshotPut(%s %s/%s): %v", kind, ns, name, err)
	}
	return changed
}

func (f *fixture) snapshots(kind string) []ledger.Snapshot {
	f.t.Helper()
	got, err := f.s.SnapshotList(f.ctx, kind)
	if err != nil {
		f.t.Fatalf("SnapshotList(%s): %v", kind, err)
	}
	return got
}

func testSnapshotPutListDelete(t *testing.T, f *fixture) {
	if got := f.snapshots("WebhookEventType"); len(got) != 0 {
		t.Fatalf("empty ledger lists %v", got)
	}
	f.putSnapshot("WebhookEventType", "shop", "order-created", `{"a":1}`, at(0))
	f.putSnapshot("WebhookEventType", "billing", "invoice-paid", `{"b":2}`, at(time.Second))
	f.putSnapshot("WebhookEventType", "shop", "a-first", `{"c":3}`, at(2*time.Second))
	f.putSnapshot("Namespace", "", "shop", `{"strict":true}`, at(3*time.Second))
	if !f.putSnapshot("WebhookEventType", "shop", "order-created", `{"a":2}`, at(4*time.Second)) {
		t.Errorf("replacing a document: changed = false")
	}
	want := []ledger.Snapshot{
		{Kind: "WebhookEventType", Namespace: "billing", Name: "invoice-paid", Doc: []byte(`{"b":2}`), UpdatedAt: at(time.Second)},
		{Kind: "WebhookEventType", Namespace: "shop", Name: "a-first", Doc: []byte(`{"c":3}`), UpdatedAt: at(2 * time.Second)},
		{Kind: "WebhookEventType", Namespace: "shop", Name: "order-created", Doc: []byte(`{"a":2}`), UpdatedAt: at(4 * time.Second)},
	}
	if diff := cmp.Diff(want, f.snapshots("WebhookEventType"), cmpOpts...); diff != "" {
		t.Errorf("SnapshotList (-want +got):\n%s", diff)
	}
	wantNS := []ledger.Snapshot{{Kind: "Namespace", Name: "shop", Doc: []byte(`{"strict":true}`), UpdatedAt: at(3 * time.Second)}}
	if diff := cmp.Diff(wantNS, f.snapshots("Namespace"), cmpOpts...); diff != "" {
		t.Errorf("SnapshotList(Namespace) (-want +got):\n%s", diff)
	}
	for range 2 { // the second delete finds nothing: no error
		if err := f.s.SnapshotDelete(f.ctx, "WebhookEventType", "shop", "a-first"); err != nil {
			t.Fatalf("SnapshotDelete: %v", err)
		}
	}
	if err := f.s.SnapshotDelete(f.ctx, "Namespace", "", "unknown"); err != nil {
		t.Fatalf("SnapshotDelete of an unknown object: %v", err)
	}
	if diff := cmp.Diff([]ledger.Snapshot{want[0], want[2]}, f.snapshots("WebhookEventType"), cmpOpts...); diff != "" {
		t.Errorf("SnapshotList after delete (-want +got):\n%s", diff)
	}
}

func testSnapshotUnchanged(t *testing.T, f *fixture) {
	if !f.putSnapshot("RetryPolicy", "shop", "fast", `{"x":1}`, at(0)) {
		t.Errorf("first put: changed = false")
	}
	if f.putSnapshot("RetryPolicy", "shop", "fast", `{"x":1}`, at(time.Minute)) {
		t.Errorf("put of the same document: changed = true")
	}
	got := f.snapshots("RetryPolicy")
	if len(got) != 1 || !got[0].UpdatedAt.Equal(at(0)) {
		t.Errorf("after an unchanged put: %+v, want UpdatedAt %v", got, at(0))
	}
}

func testSnapshotInvalid(t *testing.T, f *fixture) {
	for _, s := range []*ledger.Snapshot{
		nil,
		{Name: "x", Doc: []byte("{}"), UpdatedAt: at(0)},
		{Kind: "K", Doc: []byte("{}"), UpdatedAt: at(0)},
		{Kind: "K", Name: "x", UpdatedAt: at(0)},
		{Kind: "K", Name: "x", Doc: []byte("{}")},
	} {
		if _, err := f.s.SnapshotPut(f.ctx, s); err == nil {
			t.Errorf("SnapshotPut(%+v): no error", s)
		}
	}
}
