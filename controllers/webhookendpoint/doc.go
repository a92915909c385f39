// Package webhookendpoint reconciles WebhookEndpoints: the spec, its
// Secrets, credentials and filter into the delivery engine's registration
// and the Ready condition; the ledger's view of the endpoint (pending and
// exhausted work, circuit breaker, retry budget, evidence, counters) into
// its status. The controllers' envtest suite lives here: every spec of it
// drives an endpoint through the engine.
package webhookendpoint
