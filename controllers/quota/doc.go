// Package quota reconciles WebhookQuotas: each is registered in the
// ledger, where every replica's publishes are checked against it.
package quota
