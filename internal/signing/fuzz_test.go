package signing_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// Which part of a signed message FuzzVerifyMutation changes.
const (
	mutateSignature = iota
	mutateID
	mutateTimestamp
	mutateBody
	mutateParts
)

// FuzzVerifyMutation signs a fuzzed message with a fuzzed key, checks that
// Verify accepts exactly what Sign produced (within the tolerance, alone
// and among rotation entries), and that changing one byte of the signature
// header, the id, the timestamp or the body, or verifying with another
// key, is rejected. FuzzVerify (verify_test.go) covers arbitrary headers
// against a fixed secret.
func FuzzVerifyMutation(f *testing.F) {
	specKey, err := base64.StdEncoding.DecodeString(specSecret[len(signing.SecretPrefix):])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(specKey, specMsgID, int16(0), []byte(specPayload), uint16(10), byte(1), uint8(mutateSignature))
	f.Add(specKey, specMsgID, int16(0), []byte(specPayload), uint16(0), byte('v'^'V'), uint8(mutateSignature))
	f.Add(specKey, specMsgID, int16(0), []byte(specPayload), uint16(2), byte(','^' '), uint8(mutateSignature))
	f.Add(specKey, specMsgID, int16(-300), []byte(specPayload), uint16(3), byte(1), uint8(mutateID))
	f.Add(specKey, specMsgID, int16(300), []byte(specPayload), uint16(9), byte(1), uint8(mutateTimestamp))
	f.Add(specKey, specMsgID, int16(301), []byte(specPayload), uint16(0), byte(1), uint8(mutateTimestamp))
	f.Add(specKey, specMsgID, int16(-301), []byte{}, uint16(0), byte(0), uint8(mutateBody))
	f.Add(bytes.Repeat([]byte{0xff}, signing.MaxKeySize), "a", int16(1), []byte{0}, uint16(0), byte(0x80), uint8(mutateBody))
	f.Add([]byte{}, "bad.id", int16(0), []byte("{}"), uint16(5), byte(7), uint8(mutateID))

	now := time.Unix(specTimestamp, 0)
	f.Fuzz(func(t *testing.T, key []byte, id string, tsOff int16, body []byte, pos uint16, xor byte, part uint8) {
		if len(key) < signing.MinKeySize {
			key = append(bytes.Clone(key), bytes.Repeat([]byte{0x5a}, signing.MinKeySize-len(key))...)
		}
		key = key[:min(len(key), signing.MaxKeySize)]
		secret := sensitive.Bytes(signing.SecretPrefix + base64.StdEncoding.EncodeToString(key))
		other := bytes.Clone(key)
		other[int(pos)%len(other)] ^= 1
		otherSecret := sensitive.Bytes(signing.SecretPrefix + base64.StdEncoding.EncodeToString(other))
		if xor == 0 {
			xor = 1
		}

		at := now.Add(time.Duration(tsOff) * time.Second)
		sig, err := signing.Sign(secret, id, at, body)
		if err != nil {
			if !errors.Is(err, signing.ErrInvalidID) {
				t.Fatalf("Sign: %v", err)
			}
			id = "msg_fuzz"
			if sig, err = signing.Sign(secret, id, at, body); err != nil {
				t.Fatal(err)
			}
		}
		ts := strconv.FormatInt(at.Unix(), 10)
		verify := func(secrets []sensitive.Bytes, id, ts, sig string, body []byte) error {
			err := signing.Verify(secrets, id, ts, sig, body, now, signing.DefaultTolerance)
			if !errors.Is(err, signing.ErrInvalidID) { // that one quotes the (fuzzed) id
				assertNoSecret(t, err, secret, otherSecret)
			}
			return err
		}

		inTolerance := tsOff >= -300 && tsOff <= 300
		err = verify([]sensitive.Bytes{secret}, id, ts, sig, body)
		switch {
		case inTolerance && err != nil:
			t.Fatalf("Verify refused what Sign produced: %v", err)
		case !inTolerance && !errors.Is(err, signing.ErrTimestampTooOld) && !errors.Is(err, signing.ErrTimestampTooNew):
			t.Fatalf("Verify at %ds: %v, want a timestamp error", tsOff, err)
		case !inTolerance:
			return
		}
		// Rotation: either secret known to the receiver, either order.
		both, err := signing.SignatureHeader([]sensitive.Bytes{otherSecret, secret}, id, at, body)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify([]sensitive.Bytes{secret}, id, ts, both, body); err != nil {
			t.Fatalf("Verify refused a rotation header: %v", err)
		}
		if err := verify([]sensitive.Bytes{otherSecret, secret}, id, ts, sig, body); err != nil {
			t.Fatalf("Verify refused with the secret second: %v", err)
		}
		if !bytes.Equal(key, other) {
			if err := verify([]sensitive.Bytes{otherSecret}, id, ts, sig, body); !errors.Is(err, signing.ErrNoMatchingSignature) {
				t.Fatalf("another key verified the signature: %v", err)
			}
		}
		if err := verify([]sensitive.Bytes{secret}, id, ts, sig[:len(sig)-1], body); err == nil {
			t.Fatal("Verify accepted a truncated signature")
		}

		flip := func(s []byte) []byte {
			s = bytes.Clone(s)
			if len(s) == 0 {
				return []byte{xor}
			}
			s[int(pos)%len(s)] ^= xor
			return s
		}
		mID, mTS, mSig, mBody := id, ts, sig, body
		switch part % mutateParts {
		case mutateSignature:
			mSig = string(flip([]byte(sig)))
		case mutateID:
			mID = string(flip([]byte(id)))
		case mutateTimestamp:
			mTS = string(flip([]byte(ts)))
		case mutateBody:
			mBody = flip(body)
		}
		if err := verify([]sensitive.Bytes{secret}, mID, mTS, mSig, mBody); err == nil {
			t.Fatalf("Verify accepted a mutated message (part %d): id %q ts %q sig %q", part%mutateParts, mID, mTS, mSig)
		}
	})
}
