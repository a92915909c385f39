package publish

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
	"time"

	"github.com/hookkeeper/hookkeeper/internal/canonjson"
	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// MaxJSONDepth bounds the nesting of a request's JSON form: deeper
// documents are refused rather than parsed.
const MaxJSONDepth = 64

// bodyHashPrefix versions the canonical form: changing the form changes
// every hash, so it must come with a new prefix (and a migration story for
// idempotency keys still inside their replay window).
const bodyHashPrefix = "hookkeeper.dev/ingest/v1\n"

// canonicalBody is a validated request in canonical form: Data and Secrets are
// canonical JSON, so that what is hashed is what is stored and sent.
type canonicalBody struct {
	Type        string
	Data        json.RawMessage
	Secrets     []byte // canonical object, nil without secrets
	SecretNames []string
	ReissueOf   string
	// Endpoint, when set, addresses the event to that WebhookEndpoint
	// (a name in the namespace published to) instead of fanning it out.
	Endpoint string
	// ValidUntil, when set, is the publisher's bound on delivery (UTC);
	// it may shorten the type's validFor, never lengthen it.
	ValidUntil *time.Time
	Hash       []byte
}

// parseBody validates a request's JSON form and computes its hash.
//
// The document must be one UTF-8 JSON object with no duplicate keys at any
// depth and no trailing data. Fields are matched exactly (case-sensitive).
// secrets, reissueOf and endpoint may be absent or null; an empty secrets
// object means no secrets, an empty endpoint none.
//
// The hash covers a canonical form (sorted keys, no insignificant
// whitespace, numbers as written) of type, data, reissueOf, endpoint and
// the secret names, so a resent request hashes the same however it is
// formatted. Secret values enter it only as an HMAC under secretsKey, when
// one is configured: a plain hash would let anyone holding the database
// brute-force a low-entropy secret (a six-digit code) after it was
// scrubbed.
func parseBody(doc []byte, maxSecrets int, secretsKey []byte) (*canonicalBody, error) {
	p := parsers.get()
	defer parsers.put(p, len(doc))
	top, err := parseStrictObject(p, doc, "type", "data", "secrets", "reissueOf", "endpoint", "validUntil")
	if err != nil {
		return nil, err
	}

	var b canonicalBody
	if v, present := top.Get("type"); present {
		var ok bool
		if b.Type, ok = canonjson.String(v); !ok {
			return nil, invalid(RuleInvalid, "type", "type must be a string")
		}
	}
	if err := checkType(b.Type); err != nil {
		return nil, err
	}

	data, _ := top.Get("data")
	if !isObject(data) {
		return nil, errDataObject
	}

	secrets, _ := top.Get("secrets")
	switch {
	case secrets == nil || isNull(secrets):
		secrets = nil
	case !isObject(secrets):
		return nil, invalid(RuleInvalid, "secrets", "secrets must be a JSON object")
	case string(secrets) == "{}":
		secrets = nil
	}
	if secrets != nil {
		if b.SecretNames, err = secretNames(secrets, data, maxSecrets); err != nil {
			return nil, err
		}
	}

	if v, present := top.Get("reissueOf"); present && !isNull(v) {
		r, ok := canonjson.String(v)
		if !ok {
			return nil, invalid(RuleInvalid, "reissueOf", "reissueOf must be a string")
		}
		if err := checkReissueOf(r); err != nil {
			return nil, err
		}
		b.ReissueOf = r
	}

	if v, present := top.Get("endpoint"); present && !isNull(v) {
		e, ok := canonjson.String(v)
		if !ok {
			return nil, invalid(RuleInvalid, "endpoint", "endpoint must be a string")
		}
		if err := checkEndpoint(e); err != nil {
			return nil, err
		}
		b.Endpoint = e
	}

	if v, present := top.Get("validUntil"); present && !isNull(v) {
		u, ok := canonjson.String(v)
		if !ok {
			return nil, errValidUntil
		}
		t, err := time.Parse(time.RFC3339, u)
		if err != nil {
			return nil, errValidUntil
		}
		t = t.UTC()
		b.ValidUntil = &t
	}

	// The parser's buffers go back to the pool: keep copies.
	b.Data = bytes.Clone(data)
	if secrets != nil {
		b.Secrets = bytes.Clone(secrets)
	}
	b.Hash = bodyHash(&b, secretsKey)
	return &b, nil
}

// canonicalRequest validates a typed request's fields in the order
// parseBody does, canonicalises its data and secrets, and computes the
// same hash its JSON form would have: both forms of one request replay
// each other.
func canonicalRequest(r *Request, maxSecrets int, secretsKey []byte) (*canonicalBody, error) {
	if err := checkType(r.Type); err != nil {
		return nil, err
	}
	b := canonicalBody{Type: r.Type}
	var err error
	if b.Data, err = canonicalObject("data", r.Data); err != nil {
		return nil, err
	}
	if b.Data == nil {
		return nil, errDataObject
	}
	secrets := r.Secrets.Reveal()
	if len(secrets) > 0 && !isNull(secrets) {
		if b.Secrets, err = canonicalObject("secrets", secrets); err != nil {
			return nil, err
		}
		if b.Secrets == nil {
			return nil, invalid(RuleInvalid, "secrets", "secrets must be a JSON object")
		}
		if string(b.Secrets) == "{}" {
			b.Secrets = nil
		}
	}
	if b.Secrets != nil {
		if b.SecretNames, err = secretNames(b.Secrets, b.Data, maxSecrets); err != nil {
			return nil, err
		}
	}
	if err := checkReissueOf(r.ReissueOf); err != nil {
		return nil, err
	}
	b.ReissueOf = r.ReissueOf
	if err := checkEndpoint(r.Endpoint); err != nil {
		return nil, err
	}
	b.Endpoint = r.Endpoint
	if r.ValidUntil != nil {
		t := r.ValidUntil.UTC()
		b.ValidUntil = &t
	}
	b.Hash = bodyHash(&b, secretsKey)
	return &b, nil
}

// canonicalObject returns the canonical form of field, which must be one
// strict JSON object nested in the request (so one level less deep than
// MaxJSONDepth); nil when it is not an object.
func canonicalObject(field string, v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, nil
	}
	p := fieldParsers.get()
	defer fieldParsers.put(p, len(v))
	obj, err := p.Parse(v)
	if err != nil {
		if e, ok := errors.AsType[*canonjson.Error](err); ok && (e.Kind == canonjson.NotObject || e.Kind == canonjson.Empty) {
			return nil, nil
		}
		return nil, jsonError(err, field)
	}
	return bytes.Clone(obj.Canonical), nil
}

var (
	errDataObject = invalid(RuleInvalid, "data", "data is required and must be a JSON object")
	errValidUntil = invalid(RuleInvalid, "validUntil", "validUntil must be an RFC 3339 time (2026-12-02T15:04:05Z)")
)

func checkType(t string) error {
	if err := eventtype.Validate(t); err != nil {
		return invalid(RuleInvalid, "type", "%v", err)
	}
	return nil
}

func checkReissueOf(r string) error {
	if r != "" && !ValidID("evt", r) {
		return invalid(RuleInvalid, "reissueOf", "reissueOf must be an event ID (evt_ followed by 26 characters)")
	}
	return nil
}

func checkEndpoint(e string) error {
	if e != "" && !ValidObjectName(e) {
		return invalid(RuleInvalid, "endpoint",
			"endpoint must be the name of a WebhookEndpoint: a DNS-1123 subdomain of at most 253 lower-case letters, digits, '-' or '.'")
	}
	return nil
}

// secretNames returns the sorted names of the (canonical, non-empty)
// secrets object and refuses too many of them, an empty name, and a name
// that is also a top-level key of data. Both objects are parsed again for
// their keys: only requests with secrets pay for that.
func secretNames(secrets, data []byte, maxSecrets int) ([]string, error) {
	sp, dp := parsers.get(), parsers.get()
	defer parsers.put(sp, len(secrets))
	defer parsers.put(dp, len(data))
	so, err := sp.Parse(secrets)
	if err != nil {
		return nil, fmt.Errorf("parsing canonical secrets: %w", err)
	}
	if len(so.Members) > maxSecrets {
		return nil, invalid(RuleTooManySecrets, "secrets", "at most %d secrets are allowed, got %d", maxSecrets, len(so.Members))
	}
	do, err := dp.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parsing canonical data: %w", err)
	}
	names := make([]string, len(so.Members))
	for i, m := range so.Members {
		names[i] = string(m.Key)
	}
	for _, name := range names {
		if name == "" {
			return nil, invalid(RuleInvalid, "secrets", "secret names must not be empty")
		}
		if _, clash := slices.BinarySearchFunc(do.Members, name, func(m canonjson.Member, k string) int {
			return strings.Compare(string(m.Key), k)
		}); clash {
			return nil, invalid(RuleSecretCollision, "secrets."+name,
				"secret %q has the name of a top-level key of data; secrets are merged into data when sent, so names must differ", name)
		}
	}
	return names, nil
}

// hashDocs pools the buffers bodyHash writes its document into.
var hashDocs = sync.Pool{New: func() any { return new([]byte) }}

// bodyHash hashes the canonical form of b (see parseBody): the document
// {"data","endpoint","reissueOf","secretNames","secretsMAC","type","validUntil"},
// written in that (sorted) order, each member only when set but data and
// type, as encoding/json wrote it from a map before (TestBodyHashGolden).
func bodyHash(b *canonicalBody, secretsKey []byte) []byte {
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
	if b.ValidUntil != nil {
		doc = canonjson.AppendString(append(doc, `,"validUntil":`...), b.ValidUntil.Format(time.RFC3339Nano))
	}
	doc = append(doc, '}')
	sum := sha256.Sum256(doc)
	if cap(doc) <= maxPooledBody {
		*buf = doc
		hashDocs.Put(buf)
	}
	return sum[:]
}

// parserPool pools canonjson parsers, whose reused buffers are what keeps
// a parse from allocating. One that held a document larger than
// maxPooledBody is dropped rather than kept at that size; one kept forgets
// its last document first, so that no pooled buffer holds the secrets a
// request carried.
type parserPool struct{ sync.Pool }

func newParserPool(depth int) *parserPool {
	return &parserPool{sync.Pool{New: func() any { return canonjson.NewParser(depth) }}}
}

// parsers parse whole documents; fieldParsers the objects of a typed
// request, nested one level in its JSON form.
var parsers, fieldParsers = newParserPool(MaxJSONDepth), newParserPool(MaxJSONDepth - 1)

const maxPooledBody = DefaultMaxBytes

func (pp *parserPool) get() *canonjson.Parser { return pp.Get().(*canonjson.Parser) }

func (pp *parserPool) put(p *canonjson.Parser, n int) {
	if n <= maxPooledBody {
		p.Forget()
		pp.Put(p)
	}
}

// StrictObject parses doc, which must be one UTF-8 JSON object (see
// canonjson) whose top-level keys are all among allowed, matched exactly,
// and calls fn with it. It is the strictness of a publish request, which
// every JSON request body of the house shares (acknowledgements
// included). The object is valid only during fn. A refusal is a
// *FieldError whose Field is a path in doc.
func StrictObject(doc []byte, allowed []string, fn func(canonjson.Object) error) error {
	p := parsers.get()
	defer parsers.put(p, len(doc))
	obj, err := parseStrictObject(p, doc, allowed...)
	if err != nil {
		return err
	}
	return fn(obj)
}

// parseStrictObject is StrictObject on a parser of the caller's. The
// object is p's until p parses again.
func parseStrictObject(p *canonjson.Parser, doc []byte, allowed ...string) (canonjson.Object, error) {
	obj, err := p.Parse(doc)
	if err != nil {
		return obj, jsonError(err, "")
	}
	// Members are sorted, so the first unknown one is the first in key
	// order: the answer is stable.
	for _, m := range obj.Members {
		if !slices.ContainsFunc(allowed, func(a string) bool { return string(m.Key) == a }) {
			k := string(m.Key)
			return obj, invalid(RuleUnknownField, k, "unknown field %q; known fields are %s", k, strings.Join(allowed, ", "))
		}
	}
	return obj, nil
}

// jsonError words a refused document: the whole request when field is
// empty, else that field of a typed request. It never echoes input bytes
// other than a duplicate key (a syntax error could sit inside a secret).
func jsonError(err error, field string) error {
	e, ok := errors.AsType[*canonjson.Error](err)
	if !ok {
		return err
	}
	what, path := "body", e.Path
	if field != "" {
		what = field
		if path == "" {
			path = field
		} else {
			path = field + "." + path
		}
	}
	switch e.Kind {
	case canonjson.InvalidUTF8:
		return invalid(RuleJSON, field, "%s must be UTF-8", what)
	case canonjson.Empty:
		return invalid(RuleJSON, field, "%s is empty; want a JSON object", what)
	case canonjson.NotObject:
		return invalid(RuleJSON, field, "%s must be a JSON object", what)
	case canonjson.Syntax:
		return invalid(RuleJSON, field, "%s is not valid JSON (at byte %d)", what, e.Offset)
	case canonjson.Depth:
		return invalid(RuleJSON, path, "JSON nested deeper than %d levels", MaxJSONDepth)
	case canonjson.DuplicateKey:
		return invalid(RuleJSON, path, "duplicate key %q", e.Key)
	case canonjson.TrailingData:
		return invalid(RuleJSON, field, "unexpected data after the JSON object (at byte %d)", e.Offset)
	}
	return err
}

func isObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

func isNull(v []byte) bool { return string(v) == "null" }
