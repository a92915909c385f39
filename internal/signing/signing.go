// Package signing implements the symmetric signatures of Standard Webhooks
// (https://www.standardwebhooks.com): every attempt carries webhook-id,
// webhook-timestamp and webhook-signature headers, the signature being
// "v1," + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")).
//
// Receivers verify our deliveries with off-the-shelf Standard Webhooks
// libraries, so the scheme must match the specification byte for byte (the
// tests use the specification's own vectors and the reference JavaScript
// library). During a secret rotation an attempt is signed with every secret
// still valid, one v1 entry each, so that a receiver knowing either the old
// or the new secret accepts it. Secrets are sensitive.Bytes throughout and
// no error of this package contains secret material.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// MaxIDLength bounds a webhook id.
const MaxIDLength = 256

// ErrInvalidID reports a webhook id that cannot be signed safely.
var ErrInvalidID = errors.New("invalid webhook id")

// sigLen is the length of one base64-encoded HMAC-SHA256.
const sigLen = (sha256.Size + 2) / 3 * 4

// Sign returns the signature of one message with one secret, in the form
// "v1,<base64>".
func Sign(secret sensitive.Bytes, id string, ts time.Time, body []byte) (string, error) {
	return SignatureHeader([]sensitive.Bytes{secret}, id, ts, body)
}

// SignatureHeader returns the webhook-signature header value for a message:
// one "v1,<base64>" entry per secret, in order, separated by spaces.
func SignatureHeader(secrets []sensitive.Bytes, id string, ts time.Time, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("sign: no signing secret")
	}
	if err := checkID(id); err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	var (
		key  keyBuf
		sum  [sha256.Size]byte
		hdr  [2 * (len("v1,") + sigLen + 1)]byte // two entries without allocating
		unix = ts.Unix()
	)
	defer clear(key[:])
	out := hdr[:0]
	for i, s := range secrets {
		k, err := decodeKey(&key, s)
		if err != nil {
			return "", fmt.Errorf("sign: signing secret %d: %w", i, err)
		}
		mac(&sum, k, id, unix, body)
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, sum[:])
	}
	return string(out), nil
}

// mac computes HMAC-SHA256(key, "<id>.<unix>.<body>") into sum.
func mac(sum *[sha256.Size]byte, key []byte, id string, unix int64, body []byte) {
	h := hmac.New(sha256.New, key)
	var pre [MaxIDLength + 24]byte
	p := append(pre[:0], id...)
	p = append(p, '.')
	p = strconv.AppendInt(p, unix, 10)
	p = append(p, '.')
	h.Write(p)
	h.Write(body)
	h.Sum(sum[:0])
}

// checkID enforces what the specification asks of a message id (no '.',
// which would make "<id>.<timestamp>" ambiguous) and what a header value
// allows: printable ASCII without spaces.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidID)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidID, MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '.' {
			return fmt.Errorf("%w: %q contains '.', a space or a non-printable character", ErrInvalidID, id)
		}
	}
	return nil
}
