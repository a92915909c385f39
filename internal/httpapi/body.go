package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hookkeeper/hookkeeper/internal/canonjson"
	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// MaxJSONDepth bounds the nesting of a body: deeper documents are refused
// rather than parsed.
const MaxJSONDepth = 64

// bodyHashPrefix versions the canonical form: changing the form changes
// every hash, so it must come with a new prefix (and a migration story for
// idempotency keys still inside their replay window).
const bodyHashPrefix = "hookkeeper.dev/ingest/v1\n"

// publishBody is a validated publish request. Data and Secrets are
// canonical JSON: what is hashed is what is stored and sent.
type publishBody struct {
	Type        string
	Data        json.RawMessage
	Secrets     []byte // canonical object, nil without secrets
	SecretNames []string
	ReissueOf   string
	// Endpoint, when set, addresses the event to that WebhookEndpoint
	// (a name in the namespace published to) instead of fanning it out.
	Endpoint string
	Hash     []byte
}

// parsePublishBody validates a publish body and computes its hash.
//
// The body must be one UTF-8 JSON object with no duplicate keys at any
// depth and no trailing data. Fields are matched exactly (case-sensitive).
// secrets, reissueOf and endpoint may be absent or null; an empty secrets
// object means no secrets, an empty endpoint none.
//
// The hash covers a canonical form (sorted keys, no insignificant
// whitespace, numbers as written) of type, data, reissueOf, endpoint and
// the secret names, so a resent body hashes the same however it is formatted. Secret
// values enter it only as an HMAC under secretsKey, when one is configured:
// a plain hash would let anyone holding the database brute-force a
// low-entropy secret (a six-digit code) after it was scrubbed.
func parsePublishBody(body []byte, maxSecrets int, secretsKey []byte) (*publishBody, *apiError) {
	p := getParser()
	defer putParser(p, len(body))
	top, aerr := parseStrictObject(p, body, "type", "data", "secrets", "reissueOf", "endpoint")
	if aerr != nil {
		return nil, aerr
	}

	var b publishBody
	if v, present := top.Get("type"); present {
		var ok bool
		if b.Type, ok = canonjson.String(v); !ok {
			return nil, badRequest(CodeInvalidField, "type", "type must be a string")
		}
	}
	if err := eventtype.Validate(b.Type); err != nil {
		return nil, badRequest(CodeInvalidField, "type", "%v", err)
	}

	data, _ := top.Get("data")
	if !isObject(data) {
		return nil, badRequest(CodeInvalidField, "data", "data is required and must be a JSON object")
	}

	secrets, _ := top.Get("secrets")
	switch {
	case secrets == nil || isNull(secrets):
		secrets = nil
	case !isObject(secrets):
		return nil, badRequest(CodeInvalidField, "secrets", "secrets must be a JSON object")
	case string(secrets) == "{}":
		secrets = nil
	}
	if secrets != nil {
		var aerr *apiError
		if b.SecretNames, aerr = secretNames(secrets, data, maxSecrets); aerr != nil {
			return nil, aerr
		}
	}

	if v, present := top.Get("reissueOf"); present && !isNull(v) {
		r, ok := canonjson.String(v)
		if !ok {
			return nil, badRequest(CodeInvalidField, "reissueOf", "reissueOf must be a string")
		}
		if r != "" && !validID("evt", r) {
			return nil, badRequest(CodeInvalidField, "reissueOf", "reissueOf must be an event ID (evt_ followed by 26 characters)")
		}
		b.ReissueOf = r
	}

	if v, present := top.Get("endpoint"); present && !isNull(v) {
		e, ok := canonjson.String(v)
		if !ok {
			return nil, badRequest(CodeInvalidField, "endpoint", "endpoint must be a string")
		}
		if e != "" && !validObjectName(e) {
			return nil, badRequest(CodeInvalidField, "endpoint",
				"endpoint must be the name of a WebhookEndpoint: a DNS-1123 subdomain of at most 253 lower-case letters, digits, '-' or '.'")
		}
		b.Endpoint = e
	}

	// The parser's buffers go back to the pool: keep copies.
	b.Data = bytes.Clone(data)
	if secrets != nil {
		b.Secrets = bytes.Clone(secrets)
	}
	b.Hash = bodyHash(&b, secretsKey)
	return &b, nil
}

// secretNames returns the sorted names of the (canonical, non-empty)
// secrets object and refuses too many of them, an empty name, and a name
// that is also a top-level key of data. Both objects are parsed again for
// their keys: only bodies with secrets pay for that.
func secretNames(secrets, data []byte, maxSecrets int) ([]string, *apiError) {
	sp, dp := getParser(), getParser()
	defer putParser(sp, len(secrets))
	defer putParser(dp, len(data))
	so, err := sp.Parse(secrets)
	if err != nil {
		return nil, internalError(fmt.Errorf("parsing canonical secrets: %w", err))
	}
	if len(so.Members) > maxSecrets {
		return nil, badRequest(CodeInvalidField, "secrets", "at most %d secrets are allowed, got %d", maxSecrets, len(so.Members))
	}
	do, err := dp.Parse(data)
	if err != nil {
		return nil, internalError(fmt.Errorf("parsing canonical data: %w", err))
	}
	names := make([]string, len(so.Members))
	for i, m := range so.Members {
		names[i] = string(m.Key)
	}
	for _, name := range names {
		if name == "" {
			return nil, badRequest(CodeInvalidField, "secrets", "secret names must not be empty")
		}
		if _, clash := slices.BinarySearchFunc(do.Members, name, func(m canonjson.Member, k string) int {
			return strings.Compare(string(m.Key), k)
		}); clash {
			return nil, badRequest(CodeSecretCollision, "secrets."+name,
				"secret %q has the name of a top-level key of data; secrets are merged into data when sent, so names must differ", name)
		}
	}
	return names, nil
}

// hashDocs pools the buffers bodyHash writes its document into.
var hashDocs = sync.Pool{New: func() any { return new([]byte) }}

// bodyHash hashes the canonical form of b (see parsePublishBody): the
// document {"data","endpoint","reissueOf","secretNames","secretsMAC","type"},
// written in that (sorted) order, each member only when set but data and
// type, as encoding/json wrote it from a map before (TestBodyHashGolden).
func bodyHash(b *publishBody, secretsKey []byte) []byte {
	buf := hashDocs.Get().(*[]byte)
	doc := append((*buf)[:0], bodyHashPrefix...)
	doc = append(doc, `{"data":`...)
	doc = append(doc, b.Data...)
	// Absent unless set, so that the hashes of unaddressed events (and
	// the keys still inside their replay window) stay what they were.
	if b.Endpoint != "" {
		doc = canonjson.AppendString(append(doc, `,"endpoint":`...), b.Endpoint)
	}
	if b.ReissueOf != "" {
		doc = canonjson.AppendString(append(doc, `,"reissueOf":`...), b.ReissueOf)
	}
	if len(b.SecretNames) > 0 {
		doc = append(doc, `,"secretNames":[`...)
		for i, name := range b.SecretNames {
			if i > 0 {
				doc = append(doc, ',')
			}
			doc = canonjson.AppendString(doc, name)
		}
		doc = append(doc, ']')
		if len(secretsKey) > 0 {
			mac := hmac.New(sha256.New, secretsKey)
			mac.Write(b.Secrets)
			doc = append(doc, `,"secretsMAC":"`...)
			doc = append(hex.AppendEncode(doc, mac.Sum(nil)), '"')
		}
	}
	doc = canonjson.AppendString(append(doc, `,"type":`...), b.Type)
	doc = append(doc, '}')
	sum := sha256.Sum256(doc)
	if cap(doc) <= maxPooledBody {
		*buf = doc
		hashDocs.Put(buf)
	}
	return sum[:]
}

// parsers pools canonjson parsers, whose reused buffers are what keeps a
// parse from allocating. One that held a body larger than maxPooledBody is
// dropped rather than kept at that size; one kept forgets its last body
// first, so that no pooled buffer holds the secrets a body carried.
var parsers = sync.Pool{New: func() any { return canonjson.NewParser(MaxJSONDepth) }}

const maxPooledBody = DefaultMaxBodyBytes

func getParser() *canonjson.Parser { return parsers.Get().(*canonjson.Parser) }

func putParser(p *canonjson.Parser, bodyLen int) {
	if bodyLen <= maxPooledBody {
		p.Forget()
		parsers.Put(p)
	}
}

// parseStrictObject parses a request body that must be one UTF-8 JSON
// object (see canonjson) whose top-level keys are all among allowed,
// matched exactly. Every JSON request body goes through it, so that all of
// them are equally strict. The object is p's until p parses again.
func parseStrictObject(p *canonjson.Parser, body []byte, allowed ...string) (canonjson.Object, *apiError) {
	obj, err := p.Parse(body)
	if err != nil {
		return obj, jsonError(err)
	}
	// Members are sorted, so the first unknown one is the first in key
	// order: the answer is stable.
	for _, m := range obj.Members {
		if !slices.ContainsFunc(allowed, func(a string) bool { return string(m.Key) == a }) {
			k := string(m.Key)
			return obj, badRequest(CodeUnknownField, k, "unknown field %q; known fields are %s", k, strings.Join(allowed, ", "))
		}
	}
	return obj, nil
}

// jsonError words a refused body. It never echoes input bytes other than a
// duplicate key (a syntax error could sit inside a secret).
func jsonError(err error) *apiError {
	var e *canonjson.Error
	if !errors.As(err, &e) {
		return internalError(err)
	}
	switch e.Kind {
	case canonjson.InvalidUTF8:
		return badRequest(CodeInvalidJSON, "", "body must be UTF-8")
	case canonjson.Empty:
		return badRequest(CodeInvalidJSON, "", "body is empty; want a JSON object")
	case canonjson.NotObject:
		return badRequest(CodeInvalidJSON, "", "body must be a JSON object")
	case canonjson.Syntax:
		return badRequest(CodeInvalidJSON, "", "body is not valid JSON (at byte %d)", e.Offset)
	case canonjson.Depth:
		return badRequest(CodeInvalidJSON, e.Path, "JSON nested deeper than %d levels", MaxJSONDepth)
	case canonjson.DuplicateKey:
		return badRequest(CodeInvalidJSON, e.Path, "duplicate key %q", e.Key)
	case canonjson.TrailingData:
		return badRequest(CodeInvalidJSON, "", "unexpected data after the JSON object (at byte %d)", e.Offset)
	}
	return internalError(err)
}

func isObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

func isNull(v []byte) bool { return string(v) == "null" }
