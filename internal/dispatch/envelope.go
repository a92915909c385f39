package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// Request is one attempt to send.
type Request struct {
	// URL is the endpoint's http or https URL.
	URL string
	// Headers are the endpoint's static headers. Send refuses the attempt
	// (InvalidRequest) when one is invalid or reserved (wire.CheckHeader):
	// it never replaces one silently.
	Headers []wire.Header
	// EventID is the webhook-id and the envelope's id: the same for every
	// attempt and retry of the event.
	EventID   string
	EventType string
	// DeliveryID is sent as Hookkeeper-Delivery-Id, so that a receiver in
	// Callback mode knows where to post its acknowledgement.
	DeliveryID string
	// EventTime is when the event was published (the envelope's
	// timestamp), not when the attempt is made.
	EventTime time.Time
	// Data is the event's JSON object; nil means {}.
	Data json.RawMessage
	// Secrets is the event's one-time secrets as a JSON object, merged
	// into data on the wire; nil when there are none or they were
	// scrubbed.
	Secrets sensitive.Bytes
	// SigningSecrets are the endpoint's whsec_ secrets still valid now;
	// the attempt is signed with each (at least one is required).
	SigningSecrets []sensitive.Bytes
	// Timeout bounds the attempt, response body included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Credentials are the endpoint's values from Secrets (headers, auth,
	// TLS) as Sender.Prepare made them for this configuration of the
	// endpoint; nil sends none. The attempt applies them and checks
	// nothing again.
	Credentials *Credentials
	// ReplayUntil is sent as Hookkeeper-Replay-Until (RFC 3339, UTC, to
	// the second): until when the event may come back to the receiver,
	// which keeps its de-duplication record that long. The engine computes
	// it; zero sends no header.
	ReplayUntil time.Time
}

// DeliveryIDHeader carries the delivery's ID (canonical form).
const DeliveryIDHeader = "Hookkeeper-Delivery-Id"

// FormatReplayUntil is t as the Hookkeeper-Replay-Until header carries it:
// RFC 3339 in UTC, to the second, rounded up (a receiver that keeps its
// record until the value shown keeps it at least until t).
func FormatReplayUntil(t time.Time) string {
	t = t.UTC()
	if s := t.Truncate(time.Second); !s.Equal(t) {
		t = s.Add(time.Second)
	}
	return t.Format(time.RFC3339)
}

// ErrKeyCollision reports a secret with the name of a key of data.
var ErrKeyCollision = errors.New("secret collides with a data key")

// Envelope returns the JSON body of req:
//
//	{"id":…,"type":…,"timestamp":"<RFC 3339, UTC>","data":{…data, …secrets}}
//
// data and secrets must be JSON objects without a common key; both are
// compacted. Errors about secrets never quote them.
func Envelope(req Request) ([]byte, error) { return envelope(&req) }

// envelopeOverhead bounds what the envelope adds to its strings: the
// keys and quotes (42 bytes) and an RFC 3339 timestamp of up to 30.
const envelopeOverhead = 96

// envelope is Envelope into one allocation when no string needs escaping.
func envelope(req *Request) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(req.EventID) + len(req.EventType) + len(req.Data) + len(req.Secrets) + envelopeOverhead)
	if err := writeEnvelope(&b, req); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeEnvelope(b *bytes.Buffer, req *Request) error {
	switch {
	case req.EventID == "":
		return errors.New("envelope: event id is required")
	case req.EventType == "":
		return errors.New("envelope: event type is required")
	case req.EventTime.IsZero():
		return errors.New("envelope: event time is required")
	}
	b.WriteString(`{"id":`)
	writeString(b, req.EventID)
	b.WriteString(`,"type":`)
	writeString(b, req.EventType)
	b.WriteString(`,"timestamp":"`)
	b.Write(req.EventTime.UTC().AppendFormat(b.AvailableBuffer(), time.RFC3339Nano))
	b.WriteString(`","data":`)
	if err := writeData(b, req.Data, req.Secrets); err != nil {
		return fmt.Errorf("envelope: %w", err)
	}
	b.WriteByte('}')
	return nil
}

// writeData writes data with the members of secrets appended.
func writeData(b *bytes.Buffer, data json.RawMessage, secrets sensitive.Bytes) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		data = json.RawMessage("{}")
	}
	if data[0] != '{' {
		return errors.New("data must be a JSON object")
	}
	if !utf8.Valid(data) {
		return errors.New("data is not valid UTF-8")
	}
	secrets = bytes.TrimSpace(secrets)
	if len(secrets) == 0 || string(secrets) == "null" {
		if err := json.Compact(b, data); err != nil {
			return fmt.Errorf("data: %w", err)
		}
		return nil
	}
	// Errors from here on do not wrap the JSON errors: a syntax error
	// quotes the offending character.
	var secretKeys map[string]keyOnly
	if secrets[0] != '{' || !utf8.Valid(secrets) || json.Unmarshal(secrets, &secretKeys) != nil {
		return errors.New("secrets must be a JSON object")
	}
	if len(secretKeys) == 0 {
		if err := json.Compact(b, data); err != nil {
			return fmt.Errorf("data: %w", err)
		}
		return nil
	}
	var dataKeys map[string]keyOnly
	if err := json.Unmarshal(data, &dataKeys); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	for k := range secretKeys {
		if _, ok := dataKeys[k]; ok {
			return fmt.Errorf("%w: %q", ErrKeyCollision, k)
		}
	}
	// {data members} + {secret members}: drop data's closing brace and
	// the secrets' opening one.
	start := b.Len()
	if err := json.Compact(b, data); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	empty := b.Len()-start == 2
	b.Truncate(b.Len() - 1)
	if !empty {
		b.WriteByte(',')
	}
	at := b.Len()
	if json.Compact(b, secrets) != nil {
		return errors.New("secrets must be a JSON object")
	}
	out := b.Bytes()
	copy(out[at:], out[at+1:])
	b.Truncate(b.Len() - 1)
	return nil
}

// keyOnly decodes nothing, so that reading an object's keys does not copy
// its values (which, for secrets, would leave copies on the heap).
type keyOnly struct{}

func (*keyOnly) UnmarshalJSON([]byte) error { return nil }

// writeString writes s as a JSON string.
func writeString(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			b.Write(q)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}
