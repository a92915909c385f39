// Package receiver is the receiving half of hookkeeper's delivery
// contract, for Go services that receive its webhooks.
//
// hookkeeper delivers at least once: an attempt whose answer was lost is
// retried, an exhausted delivery can be retried by a DeliveryRecovery, and
// an admin can replay a window of events. Every copy of one event carries
// the same webhook-id, and the header Hookkeeper-Replay-Until says until
// when that event may still arrive again. A receiver that performs one
// durable effect per event must therefore remember each webhook-id it
// processed until that time, and may forget it afterwards.
//
// A Receiver does that with the receiver's own SQL database. A handler
// calls one function, Receive, which
//
//   - reads the body (bounded by Options.MaxBodyBytes) and verifies its
//     Standard Webhooks signature against the endpoint's current and
//     previous secret, within a tolerance of webhook-timestamp;
//   - opens a transaction, records the webhook-id with its replay-until in
//     a table it created, and runs the handler's callback in the same
//     transaction, so that the effect and the record commit together: one
//     delivery leaves exactly one effect, even when two copies of it
//     arrive at once (the second waits for the first's row, then is
//     recognised as a duplicate);
//   - answers: 200 for a processed event and for a recognised duplicate,
//     401 for a signature that does not verify (or a timestamp out of
//     tolerance), 400 for missing or malformed headers or body, 413 for a
//     body over the limit, 422 for an event the callback rejected, 500
//     when the callback or the database fails (hookkeeper retries);
//   - for an endpoint in acknowledgement mode Callback, posts the signed
//     acknowledgement (processed or rejected) to hookkeeper's API, again
//     for each duplicate, so that a retried or replayed delivery completes
//     too (see Acknowledger).
//
// Prune deletes the records whose replay-until has passed; RunPruner calls
// it periodically. A delivery without Hookkeeper-Replay-Until (an older
// hookkeeper) is kept for Options.DefaultRetention, and no record is
// pruned before its webhook-timestamp plus the tolerance, so that a
// captured request cannot be replayed while its signature is still
// accepted.
//
// The SQL is portable: it runs on SQLite (3.24 or later) and PostgreSQL
// (9.5 or later) through database/sql, with $1-style placeholders, which
// both accept. On SQLite, open the database with a busy timeout
// (modernc.org/sqlite: "?_pragma=busy_timeout(5000)&_txlock=immediate")
// so that concurrent duplicates wait for each other instead of failing
// with SQLITE_BUSY, and make the callback write through the transaction
// it is given, never through the *sql.DB.
//
// See docs/receivers.md in hookkeeper's repository for the reasoning.
package receiver
