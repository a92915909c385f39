package webhookendpoint

import "fmt"

// ownedMessage appends the endpoint's spec.owner to a message about its
// exhausted work (the DeliveriesExhausted condition and Event), so that
// whoever reads it, or an alert built on it, knows whom it concerns. The
// CRD bounds the owner (63 characters of [A-Za-z0-9._@+-]), so it cannot
// break the message's form.
func ownedMessage(message, owner string) string {
	if owner == "" {
		return message
	}
	return fmt.Sprintf("%s. Owner: %s", message, owner)
}
