package ledger

import (
	"testing"
	"time"
)

func TestQuotaDay(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(86399, 999), 0},
		{time.Unix(86400, 0), 1},
		{time.Unix(-1, 0), -1},
		{time.Date(2030, 3, 4, 23, 59, 59, 0, time.FixedZone("east", 5*3600)), QuotaDay(time.Date(2030, 3, 4, 18, 0, 0, 0, time.UTC))},
	} {
		if got := QuotaDay(tc.at); got != tc.want {
			t.Errorf("QuotaDay(%s) = %d, want %d", tc.at, got, tc.want)
		}
	}
}

func TestNamespaceQuotaAdmit(t *testing.T) {
	t0 := time.Date(2030, 3, 4, 23, 59, 59, 500_000_000, time.UTC)
	type step struct {
		after time.Duration // since t0
		bytes int64
		want  QuotaLimit // "" accepted
		retry time.Duration
	}
	for _, tc := range []struct {
		name  string
		hard  QuotaHard
		steps []step
	}{
		{"NoLimits", QuotaHard{}, []step{{0, 1 << 30, "", 0}, {0, 1 << 30, "", 0}}},
		{"RateBurstThenPace", QuotaHard{PublishesPerSecond: 4, PublishBurst: 2}, []step{
			{0, 1, "", 0}, {0, 1, "", 0},
			{0, 1, QuotaPublishesPerSecond, 250 * time.Millisecond},
			{100 * time.Millisecond, 1, QuotaPublishesPerSecond, 150 * time.Millisecond},
			{250 * time.Millisecond, 1, "", 0},
			{250 * time.Millisecond, 1, QuotaPublishesPerSecond, 250 * time.Millisecond},
			{time.Hour, 1, "", 0}, {time.Hour, 1, "", 0},
			{time.Hour, 1, QuotaPublishesPerSecond, 250 * time.Millisecond},
		}},
		{"RateBurstDefaultsToOneSecond", QuotaHard{PublishesPerSecond: 3}, []step{
			{0, 1, "", 0}, {0, 1, "", 0}, {0, 1, "", 0},
			{0, 1, QuotaPublishesPerSecond, 333_333_334},
		}},
		{"DayResetsAtUTCMidnight", QuotaHard{EventsPerDay: 1}, []step{
			{0, 1, "", 0},
			{0, 1, QuotaEventsPerDay, 500 * time.Millisecond},
			{500 * time.Millisecond, 1, "", 0},
			{600 * time.Millisecond, 1, QuotaEventsPerDay, 24*time.Hour - 100*time.Millisecond},
		}},
		{"PayloadBytes", QuotaHard{PayloadBytesRetained: 10}, []step{
			{0, 6, "", 0},
			{0, 5, QuotaPayloadBytesRetained, QuotaBytesRetryAfter},
			{0, 4, "", 0},
			{0, 1, QuotaPayloadBytesRetained, QuotaBytesRetryAfter},
		}},
		{"DayNamedBeforeBytesAndRate", QuotaHard{EventsPerDay: 1, PayloadBytesRetained: 1, PublishesPerSecond: 1}, []step{
			{0, 1, "", 0},
			{0, 1, QuotaEventsPerDay, 500 * time.Millisecond},
		}},
		{"RefusedNeitherBytesNorRate", QuotaHard{PayloadBytesRetained: 10, PublishesPerSecond: 1, PublishBurst: 1}, []step{
			{0, 20, QuotaPayloadBytesRetained, QuotaBytesRetryAfter},
			{0, 10, "", 0}, // the refusal took no token and no bytes
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NamespaceQuota{Namespace: "a", Hard: tc.hard}
			var accepted, refused int64
			for i, s := range tc.steps {
				qe := q.Admit(t0.Add(s.after), s.bytes)
				switch {
				case s.want == "" && qe != nil:
					t.Fatalf("step %d: refused %v, want accepted", i, qe)
				case s.want != "" && qe == nil:
					t.Fatalf("step %d: accepted, want refused for %s", i, s.want)
				case qe != nil && (qe.Limit != s.want || qe.RetryAfter != s.retry || qe.Namespace != "a"):
					t.Fatalf("step %d: refused %+v, want %s after %s", i, qe, s.want, s.retry)
				}
				if qe == nil {
					accepted++
				} else {
					refused++
				}
			}
			sameDay := QuotaDay(t0.Add(tc.steps[len(tc.steps)-1].after)) == QuotaDay(t0)
			if sameDay && (q.Used.EventsToday != accepted || q.Used.RefusedToday != refused) {
				t.Errorf("used = %+v, want %d events and %d refused", q.Used, accepted, refused)
			}
		})
	}
}

// TestQuotaRateHeldWithinOnePercent: a namespace offering ten times its
// rate for a minute is accepted its rate and its burst, no more.
func TestQuotaRateHeldWithinOnePercent(t *testing.T) {
	t0 := time.Date(2030, 3, 4, 5, 0, 0, 0, time.UTC)
	for _, rate := range []int64{1, 7, 100, 1000, 3000} {
		q := NamespaceQuota{Namespace: "a", Hard: QuotaHard{PublishesPerSecond: rate}}
		offered, accepted := rate*10*60, int64(0)
		for i := range offered {
			if q.Admit(t0.Add(time.Duration(i)*time.Minute/time.Duration(offered)), 1) == nil {
				accepted++
			}
		}
		if limit := rate*60 + q.Hard.Burst(); accepted > limit || accepted < rate*60 {
			t.Errorf("rate %d: %d accepted in a minute, want between %d and %d", rate, accepted, rate*60, limit)
		}
	}
}

func TestQuotaBatch(t *testing.T) {
	now := time.Date(2030, 3, 4, 5, 0, 0, 0, time.UTC)
	b := NewQuotaBatch([]NamespaceQuota{{Namespace: "b", Hard: QuotaHard{EventsPerDay: 1}}, {Namespace: "a"}})
	p := func(ns string) *EventInsertParams {
		return &EventInsertParams{Namespace: ns, Data: []byte(`{}`), Now: now}
	}
	if b.Admit(p("b")) != nil || b.Admit(p("b")) == nil || b.Admit(p("c")) != nil || b.Limited("c") || !b.Limited("a") {
		t.Fatal("batch decided wrong")
	}
	if got := b.Changed(); len(got) != 1 || got[0].Used.EventsToday != 1 || got[0].Used.RefusedToday != 1 {
		t.Errorf("Changed() = %+v, want b with 1 event and 1 refused", got)
	}
	var nilBatch *QuotaBatch
	if nilBatch.Admit(p("a")) != nil || nilBatch.Limited("a") || nilBatch.Changed() != nil {
		t.Error("a nil batch limits")
	}
	if got := Namespaces([]*EventInsertParams{p("b"), p("a"), p("b")}); len(got) != 2 || got[0] != "a" {
		t.Errorf("Namespaces = %v, want [a b]", got)
	}
}
