package signing

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// SecretPrefix marks a Standard Webhooks symmetric secret.
const SecretPrefix = "whsec_"

// Key sizes in bytes. The specification asks for a random key of at least
// 24 bytes (192 bits) and at most 512 bits; generated keys have 32 bytes,
// the output size of SHA-256 and the key length RFC 2104 recommends.
const (
	MinKeySize       = 24
	MaxKeySize       = 64
	GeneratedKeySize = 32
)

// ErrInvalidSecret reports a secret that is not "whsec_" + base64 of a key
// of MinKeySize to MaxKeySize bytes. Wrapping errors never quote the secret.
var ErrInvalidSecret = errors.New("invalid signing secret")

// keyBuf holds a decoded key; base64 decoding needs up to 2 bytes of slack.
type keyBuf [MaxKeySize + 2]byte

// GenerateSecret returns a new random secret: "whsec_" followed by the
// base64 (standard alphabet, padded) of GeneratedKeySize random bytes.
func GenerateSecret() (sensitive.Bytes, error) {
	var key [GeneratedKeySize]byte
	defer clear(key[:])
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("generate signing secret: %w", err)
	}
	out := make([]byte, 0, len(SecretPrefix)+base64.StdEncoding.EncodedLen(len(key)))
	out = append(out, SecretPrefix...)
	return base64.StdEncoding.AppendEncode(out, key[:]), nil
}

// ParseSecret returns the HMAC key of a secret. Like the reference
// libraries it accepts the secret with or without the "whsec_" prefix;
// surrounding whitespace (a trailing newline in a Kubernetes Secret) is
// ignored.
func ParseSecret(secret sensitive.Bytes) (sensitive.Bytes, error) {
	var buf keyBuf
	defer clear(buf[:])
	key, err := decodeKey(&buf, secret)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(key), nil
}

// decodeKey decodes secret into buf and returns the key, a slice of buf.
func decodeKey(buf *keyBuf, secret sensitive.Bytes) ([]byte, error) {
	s := bytes.TrimSpace(secret)
	s = bytes.TrimPrefix(s, []byte(SecretPrefix))
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
	}
	if base64.StdEncoding.DecodedLen(len(s)) > len(buf) {
		return nil, fmt.Errorf("%w: key longer than %d bytes", ErrInvalidSecret, MaxKeySize)
	}
	n, err := base64.StdEncoding.Decode(buf[:], s)
	if err != nil {
		// The decoder's error names an offset into the secret: drop it.
		return nil, fmt.Errorf("%w: not %s followed by standard padded base64", ErrInvalidSecret, SecretPrefix)
	}
	if n < MinKeySize || n > MaxKeySize {
		return nil, fmt.Errorf("%w: key is %d bytes, want %d to %d", ErrInvalidSecret, n, MinKeySize, MaxKeySize)
	}
	return buf[:n], nil
}
