package publish

// The publish body parser as it was before canonjson (#15), kept as the
// oracle of the differential and fuzz tests: its canonical bytes are in
// every stored body hash, and its errors are the API's. Do not change it
// (it moved here from internal/httpapi with the publish core, its
// *apiError answers becoming the core's *FieldError refusals).

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// oldParsePublishBody validates a publish body and computes its hash.
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
func oldParsePublishBody(doc []byte, maxSecrets int, secretsKey []byte) (*canonicalBody, error) {
	top, aerr := oldParseStrictObject(doc, "type", "data", "secrets", "reissueOf", "endpoint", "validUntil")
	if aerr != nil {
		return nil, aerr
	}

	var b canonicalBody
	typ, ok := top["type"].(string)
	if _, present := top["type"]; present && !ok {
		return nil, invalid(RuleInvalid, "type", "type must be a string")
	}
	if err := eventtype.Validate(typ); err != nil {
		return nil, invalid(RuleInvalid, "type", "%v", err)
	}
	b.Type = typ

	data, ok := top["data"].(map[string]any)
	if !ok {
		return nil, invalid(RuleInvalid, "data", "data is required and must be a JSON object")
	}

	var secrets map[string]any
	switch s := top["secrets"].(type) {
	case nil:
	case map[string]any:
		secrets = s
	default:
		return nil, invalid(RuleInvalid, "secrets", "secrets must be a JSON object")
	}
	if len(secrets) > maxSecrets {
		return nil, invalid(RuleTooManySecrets, "secrets", "at most %d secrets are allowed, got %d", maxSecrets, len(secrets))
	}
	for name := range secrets {
		b.SecretNames = append(b.SecretNames, name)
	}
	slices.Sort(b.SecretNames)
	for _, name := range b.SecretNames {
		if name == "" {
			return nil, invalid(RuleInvalid, "secrets", "secret names must not be empty")
		}
		if _, clash := data[name]; clash {
			return nil, invalid(RuleSecretCollision, "secrets."+name,
				"secret %q has the name of a top-level key of data; secrets are merged into data when sent, so names must differ", name)
		}
	}

	switch r := top["reissueOf"].(type) {
	case nil:
	case string:
		if r != "" && !ValidID("evt", r) {
			return nil, invalid(RuleInvalid, "reissueOf", "reissueOf must be an event ID (evt_ followed by 26 characters)")
		}
		b.ReissueOf = r
	default:
		return nil, invalid(RuleInvalid, "reissueOf", "reissueOf must be a string")
	}

	switch e := top["endpoint"].(type) {
	case nil:
	case string:
		if e != "" && !ValidObjectName(e) {
			return nil, invalid(RuleInvalid, "endpoint",
				"endpoint must be the name of a WebhookEndpoint: a DNS-1123 subdomain of at most 253 lower-case letters, digits, '-' or '.'")
		}
		b.Endpoint = e
	default:
		return nil, invalid(RuleInvalid, "endpoint", "endpoint must be a string")
	}

	switch v := top["validUntil"].(type) {
	case nil:
	case string:
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, errValidUntil
		}
		t = t.UTC()
		b.ValidUntil = &t
	default:
		return nil, errValidUntil
	}

	var err error
	if b.Data, err = oldCanonicalJSON(data); err != nil {
		return nil, err
	}
	if len(secrets) > 0 {
		if b.Secrets, err = oldCanonicalJSON(secrets); err != nil {
			return nil, err
		}
	}
	if b.Hash, err = oldBodyHash(&b, secretsKey); err != nil {
		return nil, err
	}
	return &b, nil
}

// bodyHash hashes the canonical form of b (see oldParsePublishBody).
func oldBodyHash(b *canonicalBody, secretsKey []byte) ([]byte, error) {
	doc := map[string]any{"type": b.Type, "data": b.Data}
	if b.ReissueOf != "" {
		doc["reissueOf"] = b.ReissueOf
	}
	// Absent unless set, so that the hashes of unaddressed events (and
	// the keys still inside their replay window) stay what they were.
	if b.Endpoint != "" {
		doc["endpoint"] = b.Endpoint
	}
	if b.ValidUntil != nil {
		doc["validUntil"] = b.ValidUntil.Format(time.RFC3339Nano)
	}
	if len(b.SecretNames) > 0 {
		doc["secretNames"] = b.SecretNames
		if len(secretsKey) > 0 {
			mac := hmac.New(sha256.New, secretsKey)
			mac.Write(b.Secrets)
			doc["secretsMAC"] = hex.EncodeToString(mac.Sum(nil))
		}
	}
	canon, err := oldCanonicalJSON(doc)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(bodyHashPrefix))
	h.Write(canon)
	return h.Sum(nil), nil
}

// oldParseStrictObject parses a request body that must be one UTF-8 JSON
// object (see oldParseObject) whose top-level keys are all among allowed,
// matched exactly. Every JSON request body goes through it, so that all of
// them are equally strict.
func oldParseStrictObject(body []byte, allowed ...string) (map[string]any, error) {
	if !utf8.Valid(body) {
		return nil, invalid(RuleJSON, "", "body must be UTF-8")
	}
	top, aerr := oldParseObject(body)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := oldKnownFields(top, allowed...); aerr != nil {
		return nil, aerr
	}
	return top, nil
}

// oldKnownFields refuses the first key of obj (in sorted order, so the answer
// is stable) that is not among allowed.
func oldKnownFields(obj map[string]any, allowed ...string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if !slices.Contains(allowed, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return invalid(RuleUnknownField, keys[0], "unknown field %q; known fields are %s", keys[0], strings.Join(allowed, ", "))
}

// oldCanonicalJSON encodes a tree from oldParseObject with sorted keys, no
// insignificant whitespace and no HTML escaping. json.Number keeps the
// literal the client wrote; json.RawMessage is copied compacted.
func oldCanonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// oldParseObject parses body, which must be exactly one JSON object, into
// map[string]any / []any / string / json.Number / bool / nil. Unlike
// json.Unmarshal it refuses duplicate keys (which would make "the same
// body" ambiguous), bounds the depth, and never echoes input bytes in its
// errors (a syntax error could sit inside a secret).
func oldParseObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	p := &oldParser{dec: dec}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, invalid(RuleJSON, "", "body is empty; want a JSON object")
		}
		return nil, p.syntaxError()
	}
	if tok != json.Delim('{') {
		return nil, invalid(RuleJSON, "", "body must be a JSON object")
	}
	obj, aerr := p.object()
	if aerr != nil {
		return nil, aerr
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid(RuleJSON, "", "unexpected data after the JSON object (at byte %d)", dec.InputOffset())
	}
	return obj, nil
}

type oldParser struct {
	dec  *json.Decoder
	path []oldPathElem // where the parser is, for error fields
}

type oldPathElem struct {
	key   string
	index int // when key == "" and isIndex
	isIdx bool
}

func (p *oldParser) field() string {
	var sb strings.Builder
	for i, e := range p.path {
		switch {
		case e.isIdx:
			sb.WriteString("[" + strconv.Itoa(e.index) + "]")
		case i == 0:
			sb.WriteString(e.key)
		default:
			sb.WriteString("." + e.key)
		}
	}
	return sb.String()
}

func (p *oldParser) syntaxError() error {
	return invalid(RuleJSON, "", "body is not valid JSON (at byte %d)", p.dec.InputOffset())
}

func (p *oldParser) value() (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntaxError()
	}
	switch tok {
	case json.Delim('{'):
		return p.object()
	case json.Delim('['):
		return p.array()
	}
	if _, ok := tok.(json.Delim); ok {
		return nil, p.syntaxError()
	}
	return tok, nil
}

// object parses the members of an object whose '{' was consumed.
func (p *oldParser) object() (map[string]any, error) {
	if len(p.path) >= MaxJSONDepth {
		return nil, invalid(RuleJSON, p.field(), "JSON nested deeper than %d levels", MaxJSONDepth)
	}
	obj := map[string]any{}
	for p.dec.More() {
		tok, err := p.dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, p.syntaxError()
		}
		p.path = append(p.path, oldPathElem{key: key})
		if _, dup := obj[key]; dup {
			return nil, invalid(RuleJSON, p.field(), "duplicate key %q", key)
		}
		v, aerr := p.value()
		if aerr != nil {
			return nil, aerr
		}
		obj[key] = v
		p.path = p.path[:len(p.path)-1]
	}
	if tok, err := p.dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, p.syntaxError()
	}
	return obj, nil
}

// array parses the elements of an array whose '[' was consumed.
func (p *oldParser) array() ([]any, error) {
	if len(p.path) >= MaxJSONDepth {
		return nil, invalid(RuleJSON, p.field(), "JSON nested deeper than %d levels", MaxJSONDepth)
	}
	arr := []any{}
	for i := 0; p.dec.More(); i++ {
		p.path = append(p.path, oldPathElem{index: i, isIdx: true})
		v, aerr := p.value()
		if aerr != nil {
			return nil, aerr
		}
		arr = append(arr, v)
		p.path = p.path[:len(p.path)-1]
	}
	if tok, err := p.dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, p.syntaxError()
	}
	return arr, nil
}
