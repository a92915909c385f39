package postgres

// EndpointActivitySQL is the poll of every endpoint's counters, whose plan
// activity_plan_test.go checks.
const EndpointActivitySQL = endpointActivitySQL
