package receiver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// verify checks the Standard Webhooks signature of a request and reads its
// envelope and replay-until. Its errors wrap ErrMalformed or ErrSignature
// and never quote a header value or the body.
func (r *Receiver) verify(h http.Header, body []byte, now time.Time) (*Event, error) {
	id, ts := h.Get(signing.HeaderID), h.Get(signing.HeaderTimestamp)
	err := signing.Verify(r.secrets, id, ts, h.Get(signing.HeaderSignature), body, now, r.opts.Tolerance)
	switch {
	case err == nil:
	case errors.Is(err, signing.ErrMissingHeader):
		return nil, fmt.Errorf("%w: a webhook-id, webhook-timestamp or webhook-signature header is missing", ErrMalformed)
	case errors.Is(err, signing.ErrInvalidID):
		return nil, fmt.Errorf("%w: webhook-id is empty, too long, or holds '.', a space or a control character", ErrMalformed)
	case errors.Is(err, signing.ErrInvalidTimestamp):
		return nil, fmt.Errorf("%w: webhook-timestamp is not unix seconds", ErrMalformed)
	case errors.Is(err, signing.ErrTimestampTooOld), errors.Is(err, signing.ErrTimestampTooNew):
		return nil, fmt.Errorf("%w: webhook-timestamp is more than %s from now", ErrSignature, r.opts.Tolerance)
	default:
		return nil, fmt.Errorf("%w: no signature matches", ErrSignature)
	}

	var env struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: the body is not a JSON envelope", ErrMalformed)
	}
	ev := &Event{ID: id, Type: env.Type, Data: env.Data, Body: body, DeliveryID: h.Get(DeliveryIDHeader), Header: h}
	ev.Time, _ = time.Parse(time.RFC3339Nano, env.Timestamp)
	unix, _ := strconv.ParseInt(ts, 10, 64) // verified above
	ev.ReplayUntil = r.keepUntil(h.Get(ReplayUntilHeader), time.Unix(unix, 0), now)
	return ev, nil
}

// keepUntil is the time a record must be kept until: what the delivery
// says (or now plus the default retention when it says nothing readable),
// capped by MaxRetention, and never before the signed timestamp plus the
// tolerance, while a captured copy of the request would still verify.
func (r *Receiver) keepUntil(header string, signedAt, now time.Time) time.Time {
	until, err := time.Parse(time.RFC3339Nano, header)
	if header == "" || err != nil {
		until = now.Add(r.opts.DefaultRetention)
	}
	if r.opts.MaxRetention > 0 && until.After(now.Add(r.opts.MaxRetention)) {
		until = now.Add(r.opts.MaxRetention)
	}
	if floor := signedAt.Add(r.opts.Tolerance); until.Before(floor) {
		until = floor
	}
	// Stored in milliseconds: round up, never keep less than asked.
	return until.UTC().Add(time.Millisecond - 1).Truncate(time.Millisecond)
}
