package receiver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// ErrNotAwaitingAck is hookkeeper's 409 NotAwaitingAck: the delivery does
// not wait for an acknowledgement (acknowledged already, timed out, or not
// a Callback delivery).
var ErrNotAwaitingAck = errors.New("delivery is not awaiting an acknowledgement")

// Acknowledger posts acknowledgements of Callback deliveries to
// hookkeeper's API: POST /v1/acks/{deliveryID}, signed with the endpoint's
// secret like a delivery (Standard Webhooks headers over the body). A
// Receiver uses one when Options.Acknowledger is set; a receiver that
// decides later (after a human step, a workflow) calls Acknowledge itself
// with the Event's DeliveryID. It is safe for concurrent use.
type Acknowledger struct {
	// APIURL is the base URL of hookkeeper's HTTP API, for example
	// "https://hookkeeper.hookkeeper-system.svc:8090".
	APIURL string
	// Secret is the endpoint's current signing secret ("whsec_...").
	Secret string
	// Client sends the request: a client with a 10s timeout when nil.
	Client *http.Client
	// Now is the clock of webhook-timestamp: time.Now when nil.
	Now func() time.Time
}

var defaultAckClient = &http.Client{Timeout: 10 * time.Second}

func (a *Acknowledger) check() error {
	u, err := url.Parse(a.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("acknowledger: APIURL %q is not an http or https URL", a.APIURL)
	}
	if _, err := signing.ParseSecret(sensitive.Bytes(a.Secret)); err != nil {
		return fmt.Errorf("acknowledger: secret: %w", err)
	}
	return nil
}

// Acknowledge posts the outcome of a delivery (Processed or Rejected, with
// an optional reason of at most 256 bytes, cut there). An error wraps
// ErrNotAwaitingAck for hookkeeper's 409, and says hookkeeper's status and
// error code otherwise.
func (a *Acknowledger) Acknowledge(ctx context.Context, deliveryID string, outcome Outcome, reason string) error {
	if err := a.check(); err != nil {
		return err
	}
	if deliveryID == "" {
		return errors.New("acknowledge: no delivery id")
	}
	if outcome != Processed && outcome != Rejected {
		return fmt.Errorf("acknowledge %s: outcome %q is neither %q nor %q", deliveryID, outcome, Processed, Rejected)
	}
	ack := struct {
		DeliveryID string  `json:"deliveryID"`
		Outcome    Outcome `json:"outcome"`
		Reason     string  `json:"reason,omitempty"`
	}{deliveryID, outcome, truncate(reason, maxReason)}
	body, err := json.Marshal(ack)
	if err != nil {
		return fmt.Errorf("acknowledge %s: %w", deliveryID, err)
	}
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	msgID := "ack_" + hex.EncodeToString(nonce[:])
	sig, err := signing.Sign(sensitive.Bytes(a.Secret), msgID, now, body)
	if err != nil {
		return fmt.Errorf("acknowledge %s: %w", deliveryID, err)
	}
	u := strings.TrimSuffix(a.APIURL, "/") + "/v1/acks/" + url.PathEscape(deliveryID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("acknowledge %s: %w", deliveryID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signing.HeaderID, msgID)
	req.Header.Set(signing.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(signing.HeaderSignature, sig)
	client := a.Client
	if client == nil {
		client = defaultAckClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("acknowledge %s: %w", deliveryID, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("acknowledge %s: %w", deliveryID, ErrNotAwaitingAck)
	}
	var apiErr struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(answer, &apiErr)
	return fmt.Errorf("acknowledge %s: hookkeeper answered %d %s: %s", deliveryID, resp.StatusCode, apiErr.Error.Code, apiErr.Error.Message)
}
