package conditions

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Problem is why an object's current spec is not in effect: a Ready=False
// reason and a message for humans.
type Problem struct {
	Reason, Message string
}

// MetaTime converts a ledger time for the status, at the API's precision
// (seconds), so that an unchanged time compares equal after a round trip.
func MetaTime(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// FormatTime writes a time into a condition message or an Event note.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
