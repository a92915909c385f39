package postgres

// The statements whose plans plan_test.go checks.
const (
	EventsByKeySQL     = eventsByKeySQL
	DeliveriesByKeySQL = deliveriesByKeySQL
	ExhaustedPageSQL   = exhaustedPageSQL
)
