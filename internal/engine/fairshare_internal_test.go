package engine

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestShare(t *testing.T) {
	for _, tt := range []struct{ total, holders, want int }{
		{128, 0, 128}, {128, 1, 64}, {128, 2, 42}, {128, 127, 1}, {128, 10_000, 1}, {1, 0, 1}, {0, 0, 1},
	} {
		if got := share(tt.total, tt.holders); got != tt.want {
			t.Errorf("share(%d, %d) = %d, want %d", tt.total, tt.holders, got, tt.want)
		}
	}
	for _, tt := range []struct{ workers, want int }{{128, 103}, {10, 8}, {5, 4}, {4, 3}, {2, 1}, {1, 1}} {
		if got := retryWorkers(tt.workers); got != tt.want {
			t.Errorf("retryWorkers(%d) = %d, want %d", tt.workers, got, tt.want)
		}
	}
}

// TestClaimView: what a claim may take follows what each namespace and
// endpoint holds: a namespace at its share has every endpoint skipped, one
// below it is capped at what is left, one holding nothing at the share;
// an endpoint is capped within its namespace's share; retries at theirs
// make the claim take first attempts only.
func TestClaimView(t *testing.T) {
	e := newIndexEngine() // 8 workers
	for _, id := range []string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/1"} {
		ns, name, _ := strings.Cut(id, "/")
		e.apply(ledger.Endpoint{ID: id, Namespace: ns, Name: name, Version: 1})
	}
	hold := func(id string, n int, retries int) {
		e.mu.Lock()
		e.addInFlightLocked(e.endpoints[id], n)
		e.shares.retries += retries
		e.mu.Unlock()
	}
	view := func() claimView {
		v := e.beginClaim(8)
		e.endClaim()
		slices.Sort(v.full)
		slices.Sort(v.atShare)
		return v
	}

	v := view()
	// A namespace may claim the share it will have once it holds some:
	// 8/2 while it is alone.
	if len(v.full) != 0 || len(v.slots) != 0 || len(v.namespaceSlots) != 0 || v.namespaceShare != 4 || v.firstAttemptsOnly {
		t.Fatalf("idle: %+v, want nothing skipped or capped but by the share of 4", v)
	}

	// a holds 4 (its share with one holder: 8/2), on one endpoint.
	hold("a/1", 4, 0)
	v = view()
	if want := []string{"a/1", "a/2", "a/3"}; !slices.Equal(v.full, want) || !slices.Equal(v.atShare, []string{"a"}) {
		t.Fatalf("a at its share: full %v at share %v, want %v and [a]", v.full, v.atShare, want)
	}
	if v.namespaceShare != 2 {
		t.Fatalf("a newcomer's share with one namespace holding: %d, want 8/3 = 2", v.namespaceShare)
	}

	// b holds 1: the share is 8/3 = 2; b may take 1 more, its busy
	// endpoint within share(2, 0) = 2 less the 1 it holds.
	hold("b/1", 1, 1)
	v = view()
	if !maps.Equal(v.namespaceSlots, map[string]int{"b": 1}) || v.namespaceShare != 2 {
		t.Fatalf("b below its share: namespace slots %v newcomer share %d, want map[b:1] and 8/4 = 2", v.namespaceSlots, v.namespaceShare)
	}
	if want := map[string]int{"b/1": 1}; !maps.Equal(v.slots, want) {
		t.Fatalf("endpoint slots %v, want %v", v.slots, want)
	}
	if want := []string{"a/1", "a/2", "a/3"}; !slices.Equal(v.full, want) {
		t.Fatalf("full %v, want %v", v.full, want)
	}

	// Retries at their share of 8 workers (7): first attempts only.
	hold("c/1", 1, 5)
	if v = view(); v.firstAttemptsOnly {
		t.Fatalf("6 retries in flight of 8 workers: the claim takes first attempts only")
	}
	hold("c/1", 1, 1)
	if v = view(); !v.firstAttemptsOnly {
		t.Fatalf("7 retries in flight of 8 workers: the claim takes retries too")
	}

	// a's attempts end: nothing of a is skipped any more.
	hold("a/1", -4, 0)
	hold("c/1", -2, -6)
	v = view()
	if slices.Contains(v.full, "a/2") || slices.Contains(v.atShare, "a") {
		t.Fatalf("a holds nothing and is still skipped: full %v at share %v", v.full, v.atShare)
	}
}
