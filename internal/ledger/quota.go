package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Namespace quotas (WebhookQuota, docs/adr/0048): each namespace's hard
// limits on publishing, held in the ledger with their usage so that every
// replica enforces the same numbers. A publish is checked and counted in
// the transaction that inserts its event (EventInsertMany, WriteMany):
// the check and the count are one, atomic across processes (PostgreSQL
// locks the namespace's quota row for the transaction; SQLite has one
// writer). An idempotent duplicate, a conflict and an event refused for
// its fan-out or target are neither checked nor counted; a refused
// publish is counted only as refused. A namespace without a quota row is
// not limited and costs no write.

// Quotas holds the namespaces' quotas.
type Quotas interface {
	// QuotaSet creates or replaces the hard limits of p.Namespace and
	// returns the quota. Usage survives a replacement; a new quota starts
	// from what the ledger holds of the namespace: the payload bytes its
	// publishes still retain, and the events published in its day of
	// p.Now (UTC).
	QuotaSet(ctx context.Context, p *QuotaSetParams) (NamespaceQuota, error)
	// QuotaDelete removes a namespace's quota: its publishes are no longer
	// limited. An unknown namespace is ErrNotFound.
	QuotaDelete(ctx context.Context, namespace string) error
	// QuotaGet returns a namespace's quota with its usage as of now
	// (NamespaceQuota.At), or ErrNotFound.
	QuotaGet(ctx context.Context, namespace string, now time.Time) (NamespaceQuota, error)
}

// QuotaSetParams are the hard limits of one namespace.
type QuotaSetParams struct {
	Namespace string
	Hard      QuotaHard
	Now       time.Time
}

// Validate reports why p cannot be stored.
func (p *QuotaSetParams) Validate() error {
	switch {
	case p == nil:
		return errors.New("set quota: nil params")
	case p.Namespace == "" || p.Now.IsZero():
		return errors.New("set quota: Namespace and Now are required")
	}
	return p.Hard.Validate()
}

// QuotaHard are a namespace's hard limits; 0 is no limit.
type QuotaHard struct {
	// PublishesPerSecond is the sustained publish rate (a GCRA: a new
	// publish is accepted while the publishes accepted before it, paced at
	// this rate, are no more than PublishBurst ahead of now).
	PublishesPerSecond int64
	// PublishBurst is how many publishes may come at once; 0 means
	// PublishesPerSecond (one second's worth).
	PublishBurst int64
	// EventsPerDay bounds the events accepted per UTC day.
	EventsPerDay int64
	// PayloadBytesRetained bounds the bytes of event data (as stored) the
	// ledger keeps for the namespace's publishes until retention prunes
	// them.
	PayloadBytesRetained int64
}

// Validate refuses negative limits.
func (h QuotaHard) Validate() error {
	if h.PublishesPerSecond < 0 || h.PublishBurst < 0 || h.EventsPerDay < 0 || h.PayloadBytesRetained < 0 {
		return fmt.Errorf("quota limits must not be negative: %+v", h)
	}
	return nil
}

// Burst is the effective burst of the rate limit.
func (h QuotaHard) Burst() int64 {
	if h.PublishBurst > 0 {
		return h.PublishBurst
	}
	return h.PublishesPerSecond
}

// QuotaUsed is what a namespace has used of its quota.
type QuotaUsed struct {
	// Day is the UTC day (QuotaDay) that EventsToday and RefusedToday
	// count.
	Day          int64
	EventsToday  int64
	RefusedToday int64
	// PayloadBytesRetained is the data bytes of the namespace's accepted
	// publishes not pruned yet.
	PayloadBytesRetained int64
	// RateTAT is the rate limit's theoretical arrival time (Unix
	// nanoseconds): when the next publish would be due if every accepted
	// one had come at the quota's pace; 0 before the first.
	RateTAT int64
}

// NamespaceQuota is a namespace's quota and its usage.
type NamespaceQuota struct {
	Namespace string
	Hard      QuotaHard
	Used      QuotaUsed
	UpdatedAt time.Time
}

// QuotaLimit names a hard limit, as WebhookQuota's spec.hard does.
type QuotaLimit string

const (
	QuotaPublishesPerSecond   QuotaLimit = "publishesPerSecond"
	QuotaEventsPerDay         QuotaLimit = "eventsPerDay"
	QuotaPayloadBytesRetained QuotaLimit = "payloadBytesRetained"
)

// QuotaBytesRetryAfter is the wait advised to a publish refused for
// payload bytes: they are freed only as retention prunes payloads, on
// the sweeps' schedule.
const QuotaBytesRetryAfter = time.Minute

// ErrQuotaExceeded marks a publish refused by its namespace's quota
// (*QuotaError).
var ErrQuotaExceeded = errors.New("namespace quota exceeded")

// QuotaError refuses a publish over its namespace's quota: Limit is the
// hard limit it would exceed, Hard its value and Used what was used of it
// (for the rate, the burst in use); RetryAfter when a publish may be
// accepted again (for payload bytes, a hint). Nothing was recorded.
type QuotaError struct {
	Namespace  string
	Limit      QuotaLimit
	Hard       int64
	Used       int64
	RetryAfter time.Duration
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("namespace %s is over its quota of %s: %d of %d used; retry after %s",
		e.Namespace, e.Limit, e.Used, e.Hard, e.RetryAfter)
}

// Is makes errors.Is(err, ErrQuotaExceeded) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// QuotaDay is the UTC day of t: days since the Unix epoch.
func QuotaDay(t time.Time) int64 {
	const day = 24 * 60 * 60
	s := t.Unix()
	d := s / day
	if s%day < 0 {
		d--
	}
	return d
}

// QuotaBytes is what a publish counts against PayloadBytesRetained: its
// data as stored.
func (p *EventInsertParams) QuotaBytes() int64 { return int64(len(p.Data)) }

// At is q with its daily counters as of now: zero once now is past their
// day.
func (q NamespaceQuota) At(now time.Time) NamespaceQuota {
	if day := QuotaDay(now); q.Used.Day != day {
		q.Used.Day, q.Used.EventsToday, q.Used.RefusedToday = day, 0, 0
	}
	return q
}

// Admit checks one publish of bytes payload bytes at now against q and
// counts it: accepted, it is added to the day's events, the retained
// bytes and the rate; refused (*QuotaError), only to the day's refusals.
// The limits are checked in the order events per day, payload bytes,
// rate, and the first that refuses is the one named.
func (q *NamespaceQuota) Admit(now time.Time, bytes int64) *QuotaError {
	*q = q.At(now)
	h, u := q.Hard, &q.Used
	refuse := func(limit QuotaLimit, hard, used int64, after time.Duration) *QuotaError {
		u.RefusedToday++
		return &QuotaError{Namespace: q.Namespace, Limit: limit, Hard: hard, Used: used, RetryAfter: after}
	}
	if h.EventsPerDay > 0 && u.EventsToday+1 > h.EventsPerDay {
		next := time.Unix((u.Day+1)*24*60*60, 0)
		return refuse(QuotaEventsPerDay, h.EventsPerDay, u.EventsToday, next.Sub(now))
	}
	if h.PayloadBytesRetained > 0 && u.PayloadBytesRetained+bytes > h.PayloadBytesRetained {
		return refuse(QuotaPayloadBytesRetained, h.PayloadBytesRetained, u.PayloadBytesRetained, QuotaBytesRetryAfter)
	}
	tat := u.RateTAT
	if h.PublishesPerSecond > 0 {
		// GCRA: each publish moves the arrival time by one interval;
		// one that would move it more than the burst ahead of now waits.
		interval := (int64(time.Second) + h.PublishesPerSecond - 1) / h.PublishesPerSecond
		n := now.UnixNano()
		tat = max(tat, n) + interval
		if ahead, limit := tat-n, h.Burst()*interval; ahead > limit {
			inUse := (u.RateTAT - n + interval - 1) / interval
			return refuse(QuotaPublishesPerSecond, h.PublishesPerSecond, max(inUse, 0), time.Duration(ahead-limit))
		}
	}
	u.EventsToday++
	u.PayloadBytesRetained += bytes
	u.RateTAT = tat
	return nil
}

// QuotaBatch decides a batch of publishes against their namespaces'
// quotas, as a driver loaded them (the quota rows locked or the writer
// held), and keeps what changed for the driver to write back in the same
// transaction.
type QuotaBatch struct {
	quotas  map[string]*NamespaceQuota
	changed map[string]bool
}

// NewQuotaBatch decides against quotas (one per namespace; a namespace
// without one is not limited).
func NewQuotaBatch(quotas []NamespaceQuota) *QuotaBatch {
	b := &QuotaBatch{quotas: make(map[string]*NamespaceQuota, len(quotas)), changed: map[string]bool{}}
	for i := range quotas {
		b.quotas[quotas[i].Namespace] = &quotas[i]
	}
	return b
}

// Limited reports whether ns has a quota.
func (b *QuotaBatch) Limited(ns string) bool {
	if b == nil {
		return false
	}
	_, ok := b.quotas[ns]
	return ok
}

// Admit checks and counts p (an event about to be inserted): nil when it
// may be, a *QuotaError when not.
func (b *QuotaBatch) Admit(p *EventInsertParams) error {
	if b == nil {
		return nil
	}
	q, ok := b.quotas[p.Namespace]
	if !ok {
		return nil
	}
	b.changed[p.Namespace] = true
	if qe := q.Admit(p.Now, p.QuotaBytes()); qe != nil {
		return qe
	}
	return nil
}

// Changed returns the quotas whose usage the batch changed, in namespace
// order.
func (b *QuotaBatch) Changed() []NamespaceQuota {
	if b == nil {
		return nil
	}
	out := make([]NamespaceQuota, 0, len(b.changed))
	for _, ns := range slices.Sorted(maps.Keys(b.changed)) {
		out = append(out, *b.quotas[ns])
	}
	return out
}

// Namespaces returns the distinct namespaces of params, sorted: the
// order in which a driver locks their quotas.
func Namespaces(params []*EventInsertParams) []string {
	var out []string
	for _, p := range params {
		if !slices.Contains(out, p.Namespace) {
			out = append(out, p.Namespace)
		}
	}
	slices.Sort(out)
	return out
}
