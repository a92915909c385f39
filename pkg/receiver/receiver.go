package receiver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// Headers hookkeeper sends besides the Standard Webhooks ones.
const (
	// ReplayUntilHeader carries the time (RFC 3339, UTC) until which the
	// same event, under the same webhook-id, may still be delivered again:
	// the time the receiver must keep its de-duplication record. It has the
	// value of hookkeeper's internal wire.ReplayUntilHeader (not a
	// Standard Webhooks name, so other verifiers ignore it); a test keeps
	// the two equal.
	ReplayUntilHeader = "Hookkeeper-Replay-Until"
	// DeliveryIDHeader names the delivery an acknowledgement completes
	// (Callback mode). Retries of one delivery share it; a recovery's
	// Retry or a replay is a new delivery of the same event.
	DeliveryIDHeader = "Hookkeeper-Delivery-Id"
)

// ReissueRequestedEventType is the type of the event hookkeeper sends a
// producer to ask it to publish again an event whose one-time secrets are
// gone (a DeliveryRecovery's Reissue); the value of the ledger's own
// constant, which a test keeps equal.
const ReissueRequestedEventType = "hookkeeper.reissue.requested"

// Defaults of Options.
const (
	DefaultTable        = "hookkeeper_received"
	DefaultTolerance    = 5 * time.Minute
	DefaultMaxBodyBytes = 1 << 20
	// DefaultRetention is how long a record is kept when a delivery does
	// not say (no or an unreadable Hookkeeper-Replay-Until header): longer
	// than the replay windows policies commonly declare.
	DefaultRetention = 30 * 24 * time.Hour
)

// Options configure a Receiver. Only Secrets is required.
type Options struct {
	// Secrets are the endpoint's signing secrets ("whsec_..."): the
	// current one, and while the receiver's configuration rotates, the
	// previous one. A request verifies when one of its signatures matches
	// one of them.
	Secrets []string
	// Table names the de-duplication table, created if missing:
	// DefaultTable when empty. Letters, digits and underscores, starting
	// with a letter or an underscore, at most 48 of them; on PostgreSQL,
	// choose its schema with the connection's search_path.
	Table string
	// Tolerance is how far webhook-timestamp may be from now, either way:
	// DefaultTolerance when zero.
	Tolerance time.Duration
	// MaxBodyBytes bounds the body read: DefaultMaxBodyBytes when zero.
	MaxBodyBytes int64
	// DefaultRetention is how long a record is kept when a delivery
	// carries no readable Hookkeeper-Replay-Until: DefaultRetention when
	// zero.
	DefaultRetention time.Duration
	// MaxRetention, when positive, caps the replay-until a delivery can
	// ask for (counted from now). Zero trusts the header.
	MaxRetention time.Duration
	// Now is the clock, for the tolerance and the records' times:
	// time.Now when nil.
	Now func() time.Time
	// Acknowledger, for an endpoint in acknowledgement mode Callback,
	// posts the outcome of each delivery (and of each duplicate) to
	// hookkeeper before Receive answers. Its Secret defaults to
	// Secrets[0]. Nil for mode Response, where the answer is the outcome.
	Acknowledger *Acknowledger
}

// Receiver verifies, de-duplicates and answers hookkeeper's deliveries. It
// is safe for concurrent use.
type Receiver struct {
	db      *sql.DB
	secrets []sensitive.Bytes
	opts    Options
	q       queries
	ack     *Acknowledger
}

// New returns a Receiver on db and creates its table (and an index on
// replay-until) if missing. Call it once per process at start.
func New(ctx context.Context, db *sql.DB, opts Options) (*Receiver, error) {
	if db == nil {
		return nil, errors.New("receiver: no database")
	}
	if len(opts.Secrets) == 0 {
		return nil, errors.New("receiver: no signing secret")
	}
	secrets := make([]sensitive.Bytes, len(opts.Secrets))
	for i, s := range opts.Secrets {
		secrets[i] = sensitive.Bytes(s)
		if _, err := signing.ParseSecret(secrets[i]); err != nil {
			return nil, fmt.Errorf("receiver: signing secret %d: %w", i, err) // never quotes it
		}
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if !validTable(opts.Table) {
		return nil, fmt.Errorf("receiver: table name %q: want letters, digits and underscores, not starting with a digit, at most %d", opts.Table, maxTableName)
	}
	if opts.Tolerance <= 0 {
		opts.Tolerance = DefaultTolerance
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.DefaultRetention <= 0 {
		opts.DefaultRetention = DefaultRetention
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Receiver{db: db, secrets: secrets, opts: opts, q: newQueries(opts.Table)}
	if opts.Acknowledger != nil {
		a := *opts.Acknowledger
		if a.Secret == "" {
			a.Secret = opts.Secrets[0]
		}
		if a.Now == nil {
			a.Now = opts.Now
		}
		if err := a.check(); err != nil {
			return nil, fmt.Errorf("receiver: %w", err)
		}
		r.ack = &a
	}
	if err := r.q.create(ctx, db); err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	return r, nil
}

// Event is one verified delivery, as the callback sees it.
type Event struct {
	// ID is the webhook-id: the event's identity, the same for every
	// retry, recovery and replay of it.
	ID string
	// Type is the envelope's type.
	Type string
	// Time is the envelope's timestamp: when the event was published
	// (zero when the envelope has none).
	Time time.Time
	// Data is the envelope's data. It may hold the event's one-time
	// secrets: do not log it.
	Data json.RawMessage
	// Body is the whole verified body.
	Body []byte
	// DeliveryID is the Hookkeeper-Delivery-Id header.
	DeliveryID string
	// ReplayUntil is the time until which the record of this event is
	// kept (see Receiver.Receive).
	ReplayUntil time.Time
	// Header is the request's header.
	Header http.Header
}

// ProcessFunc performs the effect of one event inside tx, the transaction
// that records its webhook-id: both commit when it returns nil, neither
// when it returns an error (the delivery is answered 500 and retried),
// except a rejection (Reject), which commits and is remembered, so that a
// duplicate gets the same rejection. It must write through tx.
type ProcessFunc func(ctx context.Context, tx *sql.Tx, ev *Event) error

// Reject returns the error a ProcessFunc returns to refuse an event for
// good (reason is kept, at most 256 bytes): the transaction commits, and
// the delivery is answered 422 (mode Response) or acknowledged as rejected
// (mode Callback).
func Reject(reason string) error { return &RejectedError{Reason: truncate(reason, maxReason)} }

// RejectedError is a rejection (see Reject).
type RejectedError struct{ Reason string }

func (e *RejectedError) Error() string { return "rejected: " + e.Reason }

// Outcome is what became of an event, as an acknowledgement says it.
type Outcome string

// Outcomes, with the values of hookkeeper's acknowledgement API.
const (
	Processed Outcome = "processed"
	Rejected  Outcome = "rejected"
)

// Errors of Result.Err, wrapped with details.
var (
	// ErrMalformed: a Standard Webhooks header is missing or malformed,
	// or the verified body is not a JSON envelope (400).
	ErrMalformed = errors.New("malformed webhook")
	// ErrSignature: no signature matches, or webhook-timestamp is out of
	// tolerance (401).
	ErrSignature = errors.New("webhook signature does not verify")
	// ErrBodyTooLarge: the body is over Options.MaxBodyBytes (413).
	ErrBodyTooLarge = errors.New("webhook body too large")
	// ErrProcess: the callback failed; nothing was committed (500).
	ErrProcess = errors.New("processing failed")
	// ErrStore: the database failed (500).
	ErrStore = errors.New("de-duplication store failed")
	// ErrAcknowledge: the event is committed but its acknowledgement
	// could not be posted (503); the retry is a duplicate that posts it
	// again.
	ErrAcknowledge = errors.New("acknowledgement not posted")
)

// Result says what Receive did.
type Result struct {
	// Status is the HTTP status answered.
	Status int
	// WebhookID is the event's id, once the signature verified.
	WebhookID string
	// Duplicate is set when the event had been recorded already: the
	// callback did not run.
	Duplicate bool
	// Outcome is the event's recorded outcome (empty when nothing was
	// recorded).
	Outcome Outcome
	// Reason is the rejection's reason.
	Reason string
	// ReplayUntil is the time until which the record is kept.
	ReplayUntil time.Time
	// Err says why the answer is not 200; it never holds secrets, the
	// body or header values.
	Err error
}

// Handler returns an http.Handler that calls Receive with process, for a
// handler that needs nothing of the Result.
func (r *Receiver) Handler(process ProcessFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.Receive(w, req, process) })
}

// Receive handles one delivery: it verifies it, runs process in the
// transaction that records its webhook-id unless it was recorded already,
// posts the acknowledgement in Callback mode, and writes the answer.
//
// The record is kept until the delivery's Hookkeeper-Replay-Until (or now
// plus DefaultRetention without it), and never less than the
// webhook-timestamp plus the tolerance; a duplicate carrying a later
// replay-until extends it.
func (r *Receiver) Receive(w http.ResponseWriter, req *http.Request, process ProcessFunc) Result {
	res := r.receive(w, req, process)
	writeAnswer(w, res)
	return res
}

func (r *Receiver) receive(w http.ResponseWriter, req *http.Request, process ProcessFunc) Result {
	// Through w, the server closes the connection of a body over the limit.
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.opts.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return Result{Status: http.StatusRequestEntityTooLarge, Err: fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, r.opts.MaxBodyBytes)}
		}
		return Result{Status: http.StatusBadRequest, Err: fmt.Errorf("%w: reading the body: %v", ErrMalformed, err)}
	}
	now := r.opts.Now()
	ev, err := r.verify(req.Header, body, now)
	if err != nil {
		return Result{Status: statusOf(err), Err: err}
	}
	rec, dup, err := r.record(req.Context(), ev, now, process)
	res := Result{WebhookID: ev.ID, Duplicate: dup, Outcome: rec.Outcome, Reason: rec.Reason, ReplayUntil: rec.ReplayUntil, Err: err}
	if err != nil {
		res.Status = statusOf(err)
		return res
	}
	if r.ack != nil && ev.DeliveryID != "" {
		err := r.ack.Acknowledge(req.Context(), ev.DeliveryID, rec.Outcome, rec.Reason)
		// Not awaiting: this delivery was acknowledged already (an
		// earlier attempt's ack was kept) or is settled otherwise.
		if err != nil && !errors.Is(err, ErrNotAwaitingAck) {
			res.Status, res.Err = http.StatusServiceUnavailable, fmt.Errorf("%w: %w", ErrAcknowledge, err)
			return res
		}
	}
	res.Status = http.StatusOK
	if rec.Outcome == Rejected && r.ack == nil {
		res.Status = http.StatusUnprocessableEntity
	}
	return res
}

// record runs process in the transaction that inserts ev's record, or
// recognises a duplicate; it returns the record as committed.
func (r *Receiver) record(ctx context.Context, ev *Event, now time.Time, process ProcessFunc) (Record, bool, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return Record{}, false, fmt.Errorf("%w: begin: %w", ErrStore, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed; also on a panic of process
	rec := Record{WebhookID: ev.ID, ReplayUntil: ev.ReplayUntil, ReceivedAt: now, Outcome: Processed}
	inserted, err := r.q.insert(ctx, tx, rec)
	if err != nil {
		return Record{}, false, fmt.Errorf("%w: %w", ErrStore, err)
	}
	if !inserted {
		// A concurrent copy waited in insert for the first one's commit:
		// the row is there now.
		prev, err := r.q.duplicate(ctx, tx, ev.ID, ev.ReplayUntil)
		if err != nil {
			return Record{}, true, fmt.Errorf("%w: %w", ErrStore, err)
		}
		if err := tx.Commit(); err != nil {
			return Record{}, true, fmt.Errorf("%w: commit: %w", ErrStore, err)
		}
		return prev, true, nil
	}
	if err := process(ctx, tx, ev); err != nil {
		rej, ok := errors.AsType[*RejectedError](err)
		if !ok {
			return Record{}, false, fmt.Errorf("%w: %w", ErrProcess, err)
		}
		rec.Outcome, rec.Reason = Rejected, truncate(rej.Reason, maxReason)
		if err := r.q.reject(ctx, tx, ev.ID, rec.Reason); err != nil {
			return Record{}, false, fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Record{}, false, fmt.Errorf("%w: commit: %w", ErrStore, err)
	}
	return rec, false, nil
}

// statusOf maps Receive's errors to the answer's status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, ErrSignature):
		return http.StatusUnauthorized
	case errors.Is(err, ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrAcknowledge):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// writeAnswer writes a small JSON answer. hookkeeper keeps an excerpt of
// it with the attempt, so it says what happened and never why in detail
// (no header value, no database error).
func writeAnswer(w http.ResponseWriter, res Result) {
	var body any
	switch {
	case res.Err != nil:
		body = map[string]string{"error": publicError(res.Err)}
	default:
		a := map[string]any{"outcome": res.Outcome, "duplicate": res.Duplicate}
		if res.Reason != "" {
			a["reason"] = res.Reason
		}
		body = a
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(res.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// publicError is the sentinel's text of err, nothing more.
func publicError(err error) string {
	for _, s := range []error{ErrMalformed, ErrSignature, ErrBodyTooLarge, ErrProcess, ErrStore, ErrAcknowledge} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "internal error"
}

// maxReason bounds a rejection's reason, as hookkeeper's acknowledgement
// API does.
const maxReason = 256

// truncate cuts s to at most n bytes at a UTF-8 character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
