package ledger

import (
	"context"
	"errors"
	"slices"
)

// Prune's walk, run once for both drivers: the stages in order within one
// Limit, each a read of candidates that takes no write lock followed by a
// write that checks them again and prunes. A driver implements only the
// two statements of a stage (PruneStatements).

// PruneStatements are the statements of one Prune stage. Both take the
// stage's default retention from g.Default(p) and name errors after g.Op().
type PruneStatements interface {
	// PruneCandidates returns up to limit IDs of events that stage g may
	// prune at p.Now, oldest first, without holding the writer or locks; an
	// ID may repeat.
	PruneCandidates(ctx context.Context, g PruneStage, p *PruneParams, limit int) ([]string, error)
	// PruneApply checks ids (distinct, sorted, at least one) again in one
	// write transaction and prunes, as g.Prunes says, those that still
	// qualify; it returns how many.
	PruneApply(ctx context.Context, g PruneStage, p *PruneParams, ids []string) (int, error)
}

// Op names the stage in errors.
func (g PruneStage) Op() string {
	if g.Evidence {
		return "prune evidence"
	}
	return "prune payloads"
}

// Prune implements Settlement.Prune over st: evidence first (an event past
// both retentions is deleted, not pruned and then deleted), then payloads,
// the stages sharing p's limit. A stage that finds no candidate writes
// nothing.
func Prune(ctx context.Context, st PruneStatements, p *PruneParams) (PruneResult, error) {
	var res PruneResult
	if p == nil {
		return res, errors.New("prune: nil params")
	}
	left := p.PruneLimit()
	for _, g := range PruneStages {
		if left <= 0 {
			break
		}
		ids, err := st.PruneCandidates(ctx, g, p, left)
		if err != nil {
			return res, err
		}
		slices.Sort(ids)
		if ids = slices.Compact(ids); len(ids) == 0 {
			continue
		}
		n, err := st.PruneApply(ctx, g, p, ids)
		if err != nil {
			return res, err
		}
		if g.Evidence {
			res.EventsDeleted += n
		} else {
			res.PayloadsPruned += n
		}
		left -= n
	}
	return res, nil
}
