package postgres

import "time"

// The activity polls, whose plans activity_plan_test.go checks: of every
// endpoint, and of what changed since a cursor.
const (
	EndpointActivitySQL      = endpointActivitySQL
	EndpointActivitySinceSQL = endpointActivitySinceSQL
)

// SetActivityOverlap sets how far before its cursor EndpointActivitySince
// reads again (ledger.ActivityOverlap), so that a test sees exactly what
// changed.
func (s *Store) SetActivityOverlap(d time.Duration) { s.activityOverlap = d }
