package ledger

// CapSlots is the per-endpoint cap of DeliveryClaim (EndpointSlots): of
// the candidates, in claim order, it keeps those within their endpoint's
// free slots and drops the later ones; an endpoint absent from slots is
// not capped. It filters cands in place. SQLite applies it in Go;
// PostgreSQL's claim statement does the same in SQL (row_number per
// endpoint), which the conformance suite's claim cases check.
func CapSlots[T any](cands []T, endpoint func(T) string, slots map[string]int) []T {
	return capBy(cands, endpoint, slots, 0)
}

// CapNamespaces is the per-namespace cap of DeliveryClaim
// (NamespaceSlots, DefaultNamespaceSlots), applied to what CapSlots kept,
// in the same way: of the candidates, in claim order, it keeps those
// within their namespace's slots, a namespace absent from slots within
// def when def is positive.
func CapNamespaces[T any](cands []T, endpoint func(T) string, slots map[string]int, def int) []T {
	return capBy(cands, func(c T) string { return NamespaceOf(endpoint(c)) }, slots, def)
}

func capBy[T any](cands []T, key func(T) string, slots map[string]int, def int) []T {
	if len(slots) == 0 && def <= 0 {
		return cands
	}
	taken := make(map[string]int, len(slots))
	out := cands[:0]
	for _, c := range cands {
		k := key(c)
		n, capped := slots[k]
		if !capped && def > 0 {
			n, capped = def, true
		}
		if capped {
			if taken[k] >= n {
				continue
			}
			taken[k]++
		}
		out = append(out, c)
	}
	return out
}
