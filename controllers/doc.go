// Package controllers is the house of hookkeeper's reconcilers, one package
// per kind as cert-manager keeps pkg/controller/<name>:
//
//   - webhookendpoint: a WebhookEndpoint's configuration into the delivery
//     engine, its delivery status from the ledger;
//   - deliveryrecovery: a DeliveryRecovery's retries and replays;
//   - retrypolicy: a RetryPolicy's schedule, evidence and the engine policy
//     the endpoints and event types that name it get;
//   - signingsecret: the signing Secrets the endpoints are owed, and their
//     rotation;
//   - eventtype: WebhookEventTypes and the contracts book publishes read;
//   - quota: WebhookQuotas registered in the ledger.
//
// The shared parts are small: conditions (condition messages, kstatus
// conditions, the one status write, invalid specs), index (the field
// indexes on WebhookEndpoints) and ledgerread (the one read of the ledger
// the controllers have; docs/adr/0050). cmd/main.go sets each reconciler up. Each
// reads its object, asks pure functions (in status.go files, with table
// tests) what the status should be, and writes that status once per
// reconcile (conditions.UpdateStatus).
package controllers
