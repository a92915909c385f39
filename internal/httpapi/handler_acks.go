package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/hookkeeper/hookkeeper/internal/canonjson"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// Acknowledger completes Callback-mode deliveries. The engine implements
// it.
type Acknowledger interface {
	// AckSecrets returns the signing secrets an acknowledgement of the
	// delivery must be signed with (those of its endpoint, rotation
	// included), or an error wrapping ledger.ErrNotFound.
	AckSecrets(ctx context.Context, deliveryID string) ([]sensitive.Bytes, error)
	// Acknowledge applies the acknowledgement, or keeps it while the
	// delivery's attempt is still being recorded (the delivery is then
	// returned in flight); errors wrap ledger.ErrNotFound or
	// ledger.ErrNotAwaitingAck when nothing changed.
	Acknowledge(ctx context.Context, params *ledger.AckRecordParams) (ledger.Delivery, error)
}

// Acknowledgement error codes.
const (
	CodeInvalidSignature Code = "InvalidSignature" // 401: the ack is not signed with the endpoint's secret
	CodeNotAwaitingAck   Code = "NotAwaitingAck"   // 409: the delivery does not wait for an ack
)

// maxAckBody bounds an acknowledgement body.
const maxAckBody = 16 << 10

// AckRequest is the body of POST /v1/acks/{deliveryID}. DeliveryID repeats
// the path so that the signature (which covers the body) binds the ack to
// its delivery: a signed ack cannot be replayed against another one.
type AckRequest struct {
	DeliveryID string            `json:"deliveryID"`
	Outcome    ledger.AckOutcome `json:"outcome"`
	Reason     string            `json:"reason,omitempty"`
}

// AckAnswer is the delivery after the acknowledgement (in_flight when the
// acknowledgement is kept until the attempt is recorded).
type AckAnswer struct {
	DeliveryID string `json:"deliveryID"`
	State      string `json:"state"`
	Reason     string `json:"reason,omitempty"`
}

// ack serves POST /v1/acks/{deliveryID}. It is authenticated by the
// endpoint's Standard Webhooks signature alone: the receiver holds the
// signing secret, and nobody else does.
func (h *Handler) ack(w http.ResponseWriter, r *http.Request) {
	log := h.cfg.Log.WithValues("route", "POST /v1/acks/{deliveryID}")
	id := r.PathValue("deliveryID")
	if tracing.Enabled() {
		// A receiver that joined the attempt's trace acknowledges in it.
		ctx, span := tracing.StartServer(r.Context(), r.Header, tracing.AckSpan, tracing.AttrDelivery.String(id))
		defer span.End()
		r = r.WithContext(ctx)
		w = &tracedWriter{ResponseWriter: w, span: span}
	}
	if err := h.serveAck(w, r, id); err != nil {
		h.fail(w, log, err)
	}
}

func (h *Handler) serveAck(w http.ResponseWriter, r *http.Request, id string) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	raw, err := readLimited(w, r, maxAckBody)
	if err != nil {
		return err
	}
	secrets, err := h.cfg.Acknowledger.AckSecrets(r.Context(), id)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return notFound("delivery", id)
	case err != nil:
		return internalError(err)
	}
	err = signing.Verify(secrets, r.Header.Get(signing.HeaderID), r.Header.Get(signing.HeaderTimestamp),
		r.Header.Get(signing.HeaderSignature), raw, h.cfg.Now(), signing.DefaultTolerance)
	if err != nil {
		return newError(http.StatusUnauthorized, CodeInvalidSignature, "",
			"the acknowledgement must be signed with the endpoint's signing secret (Standard Webhooks headers): %s", signatureProblem(err))
	}

	// Parsed only once verified: an unsigned caller learns nothing about
	// what a valid body looks like.
	req, aerr := parseAckBody(raw, id)
	if aerr != nil {
		return aerr
	}

	d, err := h.cfg.Acknowledger.Acknowledge(r.Context(), &ledger.AckRecordParams{
		DeliveryID: id, Outcome: req.Outcome, Reason: req.Reason, Now: h.cfg.Now(),
	})
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return notFound("delivery", id)
	case errors.Is(err, ledger.ErrNotAwaitingAck):
		return newError(http.StatusConflict, CodeNotAwaitingAck, "",
			"delivery %q is not awaiting an acknowledgement (it is %s)", id, d.State)
	case err != nil:
		return internalError(err)
	}
	return writeJSON(w, http.StatusOK, AckAnswer{DeliveryID: d.ID, State: string(d.State), Reason: string(d.ExhaustReason)})
}

// parseAckBody validates an acknowledgement of delivery id as strictly as
// a publish body (publish.StrictObject): one UTF-8 object, no duplicate
// keys, no trailing data, exact field names. reason may be absent or null.
func parseAckBody(raw []byte, id string) (AckRequest, *apiError) {
	var req AckRequest
	var aerr *apiError
	err := publish.StrictObject(raw, []string{"deliveryID", "outcome", "reason"}, func(top canonjson.Object) error {
		req, aerr = ackFields(top, id)
		return nil
	})
	if err != nil {
		return AckRequest{}, publishRefusal(err)
	}
	return req, aerr
}

// ackFields reads the fields of a strict acknowledgement object.
func ackFields(top canonjson.Object, id string) (AckRequest, *apiError) {
	// A missing or non-string value reads as "", which is refused below.
	v, _ := top.Get("deliveryID")
	deliveryID, _ := canonjson.String(v)
	v, _ = top.Get("outcome")
	outcome, _ := canonjson.String(v)
	req := AckRequest{DeliveryID: deliveryID, Outcome: ledger.AckOutcome(outcome)}
	if req.DeliveryID != id {
		return AckRequest{}, badRequest(CodeInvalidField, "deliveryID", "deliveryID must be a string repeating the delivery of the path")
	}
	if req.Outcome != ledger.AckProcessed && req.Outcome != ledger.AckRejected {
		return AckRequest{}, badRequest(CodeInvalidField, "outcome", "outcome must be %q or %q", ledger.AckProcessed, ledger.AckRejected)
	}
	if v, present := top.Get("reason"); present && string(v) != "null" {
		r, ok := canonjson.String(v)
		if !ok {
			return AckRequest{}, badRequest(CodeInvalidField, "reason", "reason must be a string")
		}
		req.Reason = r
	}
	if len(req.Reason) > ledger.MaxAckReason {
		return AckRequest{}, badRequest(CodeInvalidField, "reason", "reason must be at most %d bytes", ledger.MaxAckReason)
	}
	return req, nil
}

// signatureProblem says what was wrong with a signature, without echoing
// any header value.
func signatureProblem(err error) string {
	switch {
	case errors.Is(err, signing.ErrMissingHeader):
		return "a webhook-id, webhook-timestamp or webhook-signature header is missing"
	case errors.Is(err, signing.ErrTimestampTooOld), errors.Is(err, signing.ErrTimestampTooNew):
		return "webhook-timestamp is outside the allowed " + signing.DefaultTolerance.String()
	case errors.Is(err, signing.ErrInvalidTimestamp):
		return "webhook-timestamp is not a unix time"
	default:
		return "no signature matches"
	}
}
