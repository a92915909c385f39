// Package signingsecret keeps the signing Secrets the WebhookEndpoints are
// owed: it generates the missing ones and records rotations, so that the
// engine never signs with a secret no Secret remembers.
package signingsecret
