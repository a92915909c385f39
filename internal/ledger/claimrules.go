package ledger

// CapSlots is the per-endpoint cap of DeliveryClaim (EndpointSlots): of
// the candidates, in claim order, it keeps those within their endpoint's
// free slots and drops the later ones; an endpoint absent from slots is
// not capped. It filters cands in place. SQLite applies it in Go;
// PostgreSQL's claim statement does the same in SQL (row_number per
// endpoint), which the conformance suite's claim cases check.
func CapSlots[T any](cands []T, endpoint func(T) string, slots map[string]int) []T {
	if len(slots) == 0 {
		return cands
	}
	taken := make(map[string]int, len(slots))
	out := cands[:0]
	for _, c := range cands {
		ep := endpoint(c)
		if n, capped := slots[ep]; capped {
			if taken[ep] >= n {
				continue
			}
			taken[ep]++
		}
		out = append(out, c)
	}
	return out
}
