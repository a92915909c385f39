package sqlite

import "time"

// SetActivityOverlap sets how far before its cursor EndpointActivitySince
// reads again (ledger.ActivityOverlap), so that a test sees exactly what
// changed.
func (s *Store) SetActivityOverlap(d time.Duration) { s.activityOverlap = d }
