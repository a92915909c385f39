package backoff

import "time"

// series answers prefix sums over a policy's delays in O(1), so that Plan can
// count attempts under MaxAge or MaxAttempts (possibly billions of them, as
// with a Fixed 1ns delay) by binary search instead of iteration.
type series interface {
	// nominal is the sum of the nominal delays before attempts 2..k+1,
	// saturating at the saturated sentinel.
	nominal(k int64) int64
	// upper is the same sum over the delays' jitter upper bounds.
	upper(k int64) int64
}

func (p Policy) series() series {
	switch p.Strategy {
	case Linear:
		return p.linearSeries()
	case Schedule:
		if len(p.Schedule) == 0 { // invalid; delay 0 like an unknown strategy
			return p.stepped(nil, 0)
		}
		head := make([]time.Duration, len(p.Schedule))
		for i := range head {
			head[i] = p.delay(int64(i) + 1)
		}
		return p.stepped(head, head[len(head)-1])
	case Exponential:
		var head []time.Duration
		it := p.expIter()
		for it.grows() {
			head = append(head, it.d)
			it.step()
		}
		return p.stepped(head, it.d)
	default: // Fixed; an unknown strategy has delay 0
		return p.stepped(nil, p.delay(1))
	}
}

// stepped is an explicit head of delays followed by a constant tail: the
// shape of Fixed (no head), Schedule (the list, then its last entry) and
// Exponential (growth, then the cap).
type stepped struct {
	sum, sumHi   []int64 // prefix sums over the head; sum[0] = 0
	tail, tailHi int64
}

func (p Policy) stepped(head []time.Duration, tail time.Duration) *stepped {
	s := &stepped{sum: make([]int64, len(head)+1), sumHi: make([]int64, len(head)+1)}
	for i, d := range head {
		_, hi := p.bounds(d)
		s.sum[i+1] = satAdd(s.sum[i], int64(d))
		s.sumHi[i+1] = satAdd(s.sumHi[i], int64(hi))
	}
	_, hi := p.bounds(tail)
	s.tail, s.tailHi = int64(tail), int64(hi)
	return s
}

func (s *stepped) nominal(k int64) int64 { return s.at(s.sum, s.tail, k) }
func (s *stepped) upper(k int64) int64   { return s.at(s.sumHi, s.tailHi, k) }

func (s *stepped) at(sum []int64, tail, k int64) int64 {
	n := int64(len(sum) - 1)
	if k <= n {
		return sum[max(k, 0)]
	}
	return satAdd(sum[n], satMul(k-n, tail))
}

// linear is the Linear strategy in closed form: delay d(m) = min(c, i·m)
// before attempt m+1. Iterating is not an option: with i = 1ns the delays
// stay below the cap for billions of attempts.
type linear struct {
	i, c, j int64
	m0      int64 // last m with i·m <= c (nominal delay uncapped)
	mh      int64 // last m with i·m + spread(i·m) <= c (upper bound uncapped)
}

func (p Policy) linearSeries() *linear {
	l := &linear{i: int64(clampDur(p.InitialDelay)), c: int64(p.ceiling()), j: p.jitter()}
	if l.i == 0 {
		l.m0, l.mh = saturated, saturated
		return l
	}
	l.m0 = l.c / l.i
	// The upper bound is monotone in m, so binary search the last m <= m0
	// where it is still below the cap. i·m <= c keeps every term in range.
	lo, hi := int64(0), l.m0
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if d := time.Duration(l.i * mid); d+spread(d, l.j) <= time.Duration(l.c) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	l.mh = lo
	return l
}

func (l *linear) nominal(k int64) int64 {
	k = max(k, 0)
	u := min(k, l.m0)
	return satAdd(satMul(l.i, tri(u)), satMul(k-u, l.c))
}

func (l *linear) upper(k int64) int64 {
	k = max(k, 0)
	u := min(k, l.mh)
	// For m <= mh the upper bound is i·m + floor(i·m·j/100). Writing
	// i = 100q + r, that is (i + q·j)·m + floor(r·j·m/100).
	q, r := l.i/100, l.i%100
	sum := satAdd(satMul(l.i+q*l.j, tri(u)), floorSum100(r*l.j, u))
	return satAdd(sum, satMul(k-u, l.c))
}
