package ledgertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Recovery operations (RecoveryOperationStart): the first start of a key
// is its record for good; later starts, whatever they pass, read it.

// testOperationFirstStartWins starts an operation, starts it again with
// another hash and time, and starts another key.
func testOperationFirstStartWins(t *testing.T, f *fixture) {
	key := ledger.RecoveryOperationKey("shop", "retry-orders")
	start := func(key, hash string, now time.Time) ledger.RecoveryOperation {
		t.Helper()
		op, err := f.s.RecoveryOperationStart(f.ctx, &ledger.RecoveryOperationParams{Key: key, SpecHash: hash, ObjectUID: "uid-" + hash, Now: now})
		if err != nil {
			t.Fatalf("RecoveryOperationStart(%s): %v", key, err)
		}
		return op
	}
	first := ledger.RecoveryOperation{Key: key, SpecHash: "h1", ObjectUID: "uid-h1", StartedAt: t0, Created: true}
	wantEqual(t, "first start", start(key, "h1", t0), first)
	again := first
	again.Created = false
	wantEqual(t, "the same start again", start(key, "h1", at(time.Hour)), again)
	wantEqual(t, "a start with another hash", start(key, "h2", at(2*time.Hour)), again)
	other := ledger.RecoveryOperationKey("shop", "dismiss-orders")
	wantEqual(t, "another key", start(other, "h2", at(time.Minute)),
		ledger.RecoveryOperation{Key: other, SpecHash: "h2", ObjectUID: "uid-h2", StartedAt: at(time.Minute), Created: true})

	// Invalid params are refused and record nothing.
	fresh := ledger.RecoveryOperationKey("shop", "fresh")
	for name, p := range map[string]*ledger.RecoveryOperationParams{
		"nil":         nil,
		"no key":      {SpecHash: "h", Now: t0},
		"no hash":     {Key: fresh, Now: t0},
		"no time":     {Key: fresh, SpecHash: "h"},
		"all missing": {},
	} {
		if _, err := f.s.RecoveryOperationStart(f.ctx, p); err == nil {
			t.Errorf("%s: RecoveryOperationStart accepted invalid params", name)
		}
	}
	if op := start(fresh, "h3", at(3*time.Hour)); !op.Created || op.SpecHash != "h3" {
		t.Fatalf("an invalid start recorded something: %+v", op)
	}
}

// testOperationStartConcurrent starts one key from several goroutines at
// once, each with its own hash: one creates the record, every one reads it.
func testOperationStartConcurrent(t *testing.T, f *fixture) {
	const workers = 8
	key := ledger.RecoveryOperationKey("shop", "race")
	var wg sync.WaitGroup
	got := make([]ledger.RecoveryOperation, workers)
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			got[i], errs[i] = f.s.RecoveryOperationStart(f.ctx, &ledger.RecoveryOperationParams{
				Key: key, SpecHash: fmt.Sprintf("h%d", i), ObjectUID: fmt.Sprintf("uid-%d", i), Now: at(time.Duration(i) * time.Second)})
		})
	}
	wg.Wait()
	created := -1
	for i := range workers {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if got[i].Created {
			if created >= 0 {
				t.Fatalf("starts %d and %d both created the record", created, i)
			}
			created = i
		}
	}
	if created < 0 {
		t.Fatal("no start created the record")
	}
	want := ledger.RecoveryOperation{Key: key, SpecHash: fmt.Sprintf("h%d", created), ObjectUID: fmt.Sprintf("uid-%d", created), StartedAt: at(time.Duration(created) * time.Second)}
	for i := range workers {
		g := got[i]
		g.Created = false
		wantEqual(t, fmt.Sprintf("start %d", i), g, want)
	}
}
