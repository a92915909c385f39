package ledger

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// fakePrune is a driver whose stages find the candidates of found and
// prune as many as pruned says (all when absent), recording the calls.
type fakePrune struct {
	found  map[PruneStage][]string
	pruned map[PruneStage]int
	fail   map[PruneStage]error

	candidates []pruneCall
	applied    []pruneCall
}

type pruneCall struct {
	stage PruneStage
	limit int
	ids   []string
}

func (f *fakePrune) PruneCandidates(_ context.Context, g PruneStage, _ *PruneParams, limit int) ([]string, error) {
	f.candidates = append(f.candidates, pruneCall{stage: g, limit: limit})
	ids := f.found[g]
	return slices.Clone(ids[:min(len(ids), limit)]), nil
}

func (f *fakePrune) PruneApply(_ context.Context, g PruneStage, _ *PruneParams, ids []string) (int, error) {
	f.applied = append(f.applied, pruneCall{stage: g, ids: ids})
	if err := f.fail[g]; err != nil {
		return 0, err
	}
	if n, ok := f.pruned[g]; ok {
		return n, nil
	}
	return len(ids), nil
}

func TestPruneWalksTheStagesWithinOneLimit(t *testing.T) {
	evidence, payloads := PruneStages[0], PruneStages[3]
	f := &fakePrune{found: map[PruneStage][]string{
		evidence: {"evt_b", "evt_a", "evt_b"}, // a candidate may repeat
		payloads: {"evt_c", "evt_d", "evt_e", "evt_f"},
	}}
	res, err := Prune(context.Background(), f, &PruneParams{Now: time.Unix(0, 0), Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := (PruneResult{EventsDeleted: 2, PayloadsPruned: 2}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	// Every stage in order until the limit is spent: evidence (3 stages)
	// with 4, 2, 2 left, then the first payload stage with 2.
	var limits []int
	for i, c := range f.candidates {
		if c.stage != PruneStages[i] {
			t.Errorf("call %d was stage %+v, want %+v", i, c.stage, PruneStages[i])
		}
		limits = append(limits, c.limit)
	}
	if want := []int{4, 2, 2, 2}; !slices.Equal(limits, want) {
		t.Errorf("candidate limits %v, want %v (the last stage is not read once the limit is spent)", limits, want)
	}
	// Only stages with candidates write, with their IDs sorted and distinct.
	if len(f.applied) != 2 {
		t.Fatalf("applied %d stages, want 2: %+v", len(f.applied), f.applied)
	}
	if got := f.applied[0].ids; !slices.Equal(got, []string{"evt_a", "evt_b"}) {
		t.Errorf("evidence applied to %v, want [evt_a evt_b]", got)
	}
	if got := f.applied[1].ids; !slices.Equal(got, []string{"evt_c", "evt_d"}) {
		t.Errorf("payloads applied to %v, want [evt_c evt_d]", got)
	}
}

func TestPruneCountsWhatTheRecheckKept(t *testing.T) {
	// Candidates that no longer qualify in the write transaction leave
	// their share of the limit to the next stages.
	evidence, payloads := PruneStages[0], PruneStages[3]
	f := &fakePrune{
		found:  map[PruneStage][]string{evidence: {"evt_a", "evt_b"}, payloads: {"evt_c", "evt_d"}},
		pruned: map[PruneStage]int{evidence: 1},
	}
	res, err := Prune(context.Background(), f, &PruneParams{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := (PruneResult{EventsDeleted: 1, PayloadsPruned: 2}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
}

func TestPruneStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	evidence := PruneStages[0]
	f := &fakePrune{found: map[PruneStage][]string{evidence: {"evt_a"}}, fail: map[PruneStage]error{evidence: boom}}
	if _, err := Prune(context.Background(), f, &PruneParams{}); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if len(f.candidates) != 1 {
		t.Errorf("%d stages read after the error, want none", len(f.candidates)-1)
	}
	if _, err := Prune(context.Background(), f, nil); err == nil {
		t.Error("nil params accepted")
	}
}

func TestPruneDefaultLimit(t *testing.T) {
	f := &fakePrune{}
	if _, err := Prune(context.Background(), f, &PruneParams{}); err != nil {
		t.Fatal(err)
	}
	if len(f.candidates) != len(PruneStages) || f.candidates[0].limit != DefaultSweepLimit {
		t.Errorf("calls %+v, want every stage read with the default limit %d", f.candidates, DefaultSweepLimit)
	}
	if len(f.applied) != 0 {
		t.Errorf("stages without candidates wrote: %+v", f.applied)
	}
	if g := (PruneStage{Evidence: true}); g.Op() != "prune evidence" || (PruneStage{}).Op() != "prune payloads" {
		t.Errorf("Op names %q, %q", g.Op(), PruneStage{}.Op())
	}
}
