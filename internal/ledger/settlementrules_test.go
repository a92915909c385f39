package ledger

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTruncateAckReason(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short", "out of stock", "out of stock"},
		{"exactly the limit", strings.Repeat("a", MaxAckReason), strings.Repeat("a", MaxAckReason)},
		{"cut", strings.Repeat("a", MaxAckReason+1), strings.Repeat("a", MaxAckReason)},
		{"never inside a character", strings.Repeat("a", MaxAckReason-1) + "€", strings.Repeat("a", MaxAckReason-1)},
		{"invalid UTF-8 replaced", "bad \xff byte", "bad \uFFFD byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TruncateAckReason(tc.in)
			if got != tc.want || len(got) > MaxAckReason || !utf8.ValidString(got) {
				t.Fatalf("TruncateAckReason = %q (%d bytes), want %q", got, len(got), tc.want)
			}
		})
	}
}

func TestAckTimeoutTransition(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, next := range []Next{
		{State: StateDelivered},
		{State: StateAwaitingAck, AckDeadline: now},
		{State: StateScheduled},
		{State: StateExhausted},
	} {
		if _, err := (&AckTimeoutParams{Next: next, Now: now}).Transition(); err == nil {
			t.Errorf("Transition accepted Next %+v", next)
		}
	}
	tr, err := (&AckTimeoutParams{Next: Next{State: StateExhausted, Reason: ExhaustAckTimeout}, Now: now}).Transition()
	if err != nil || tr.State != StateExhausted || tr.Resolution != ResolutionUnresolved || tr.TerminalAt == nil ||
		!tr.Failure || tr.FailureCause != AckTimeoutReason || *tr.LastError != AckTimeoutReason {
		t.Fatalf("exhausting transition = %+v, %v", tr, err)
	}
	if _, err := (&AckRecordParams{Outcome: "later", Now: now}).Transition(); err == nil {
		t.Error("AckRecordParams.Transition accepted an unknown outcome")
	}
}

func TestSweepLimit(t *testing.T) {
	for in, want := range map[int]int{-1: DefaultSweepLimit, 0: DefaultSweepLimit, 7: 7, MaxSweepLimit + 1: MaxSweepLimit} {
		if got := SweepLimit(in); got != want {
			t.Errorf("SweepLimit(%d) = %d, want %d", in, got, want)
		}
	}
}
