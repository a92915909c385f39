// Package eventtype reconciles WebhookEventTypes and keeps the book of the
// event types' contracts that publishes read (EventTypeContracts).
package eventtype
