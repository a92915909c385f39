// Package engine is hookkeeper's delivery engine: it ingests events into
// the ledger, claims due deliveries, sends them (package dispatch), decides
// what follows each attempt (backoff, horizon, exhaustion) and records the
// outcome, all through the ledger.Store contract. It imports no Kubernetes
// package: the controllers drive it through the Go API in this package
// (RegisterEndpoint, RemoveEndpoint, EndpointStats, OnExhausted), and the
// HTTP API (internal/httpapi) through Publish and Acknowledge.
//
// One Engine runs per process. With the PostgreSQL ledger several processes
// share the work: claims are leases, so no delivery is sent by two engines
// at once, and a lease that outlives its owner (a crash) returns the
// delivery to the pool after the longest attempt timeout plus a margin.
package engine
