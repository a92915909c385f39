// Package wire says which endpoint URLs and static headers hookkeeper can
// put on the wire, so that one definition serves the three places that
// must agree: the WebhookEndpoint controller (an endpoint whose URL can
// never be dialled is not Ready), the engine's registration (it refuses
// such a configuration) and the sender (it never sends a static header
// that collides with one it sets). The CRD's CEL rules express the same
// checks for the API server; a test compares them with these functions on
// the real API server, and the CRD's reserved header list with
// ReservedHeaders, so that they cannot drift. It also defines Header, the
// static header as the ledger stores it and the sender sends it.
//
// It imports nothing of hookkeeper: it is a leaf.
package wire
