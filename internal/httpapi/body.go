package httpapi

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
	"unicode/utf8"

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
	top, aerr := parseStrictObject(body, "type", "data", "secrets", "reissueOf", "endpoint")
	if aerr != nil {
		return nil, aerr
	}

	var b publishBody
	typ, ok := top["type"].(string)
	if _, present := top["type"]; present && !ok {
		return nil, badRequest(CodeInvalidField, "type", "type must be a string")
	}
	if err := eventtype.Validate(typ); err != nil {
		return nil, badRequest(CodeInvalidField, "type", "%v", err)
	}
	b.Type = typ

	data, ok := top["data"].(map[string]any)
	if !ok {
		return nil, badRequest(CodeInvalidField, "data", "data is required and must be a JSON object")
	}

	var secrets map[string]any
	switch s := top["secrets"].(type) {
	case nil:
	case map[string]any:
		secrets = s
	default:
		return nil, badRequest(CodeInvalidField, "secrets", "secrets must be a JSON object")
	}
	if len(secrets) > maxSecrets {
		return nil, badRequest(CodeInvalidField, "secrets", "at most %d secrets are allowed, got %d", maxSecrets, len(secrets))
	}
	for name := range secrets {
		b.SecretNames = append(b.SecretNames, name)
	}
	slices.Sort(b.SecretNames)
	for _, name := range b.SecretNames {
		if name == "" {
			return nil, badRequest(CodeInvalidField, "secrets", "secret names must not be empty")
		}
		if _, clash := data[name]; clash {
			return nil, badRequest(CodeSecretCollision, "secrets."+name,
				"secret %q has the name of a top-level key of data; secrets are merged into data when sent, so names must differ", name)
		}
	}

	switch r := top["reissueOf"].(type) {
	case nil:
	case string:
		if r != "" && !validID("evt", r) {
			return nil, badRequest(CodeInvalidField, "reissueOf", "reissueOf must be an event ID (evt_ followed by 26 characters)")
		}
		b.ReissueOf = r
	default:
		return nil, badRequest(CodeInvalidField, "reissueOf", "reissueOf must be a string")
	}

	switch e := top["endpoint"].(type) {
	case nil:
	case string:
		if e != "" && !validObjectName(e) {
			return nil, badRequest(CodeInvalidField, "endpoint",
				"endpoint must be the name of a WebhookEndpoint: a DNS-1123 subdomain of at most 253 lower-case letters, digits, '-' or '.'")
		}
		b.Endpoint = e
	default:
		return nil, badRequest(CodeInvalidField, "endpoint", "endpoint must be a string")
	}

	var err error
	if b.Data, err = canonicalJSON(data); err != nil {
		return nil, internalError(err)
	}
	if len(secrets) > 0 {
		if b.Secrets, err = canonicalJSON(secrets); err != nil {
			return nil, internalError(err)
		}
	}
	if b.Hash, err = bodyHash(&b, secretsKey); err != nil {
		return nil, internalError(err)
	}
	return &b, nil
}

// bodyHash hashes the canonical form of b (see parsePublishBody).
func bodyHash(b *publishBody, secretsKey []byte) ([]byte, error) {
	doc := map[string]any{"type": b.Type, "data": b.Data}
	if b.ReissueOf != "" {
		doc["reissueOf"] = b.ReissueOf
	}
	// Absent unless set, so that the hashes of unaddressed events (and
	// the keys still inside their replay window) stay what they were.
	if b.Endpoint != "" {
		doc["endpoint"] = b.Endpoint
	}
	if len(b.SecretNames) > 0 {
		doc["secretNames"] = b.SecretNames
		if len(secretsKey) > 0 {
			mac := hmac.New(sha256.New, secretsKey)
			mac.Write(b.Secrets)
			doc["secretsMAC"] = hex.EncodeToString(mac.Sum(nil))
		}
	}
	canon, err := canonicalJSON(doc)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(bodyHashPrefix))
	h.Write(canon)
	return h.Sum(nil), nil
}

// parseStrictObject parses a request body that must be one UTF-8 JSON
// object (see parseObject) whose top-level keys are all among allowed,
// matched exactly. Every JSON request body goes through it, so that all of
// them are equally strict.
func parseStrictObject(body []byte, allowed ...string) (map[string]any, *apiError) {
	if !utf8.Valid(body) {
		return nil, badRequest(CodeInvalidJSON, "", "body must be UTF-8")
	}
	top, aerr := parseObject(body)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := knownFields(top, allowed...); aerr != nil {
		return nil, aerr
	}
	return top, nil
}

// knownFields refuses the first key of obj (in sorted order, so the answer
// is stable) that is not among allowed.
func knownFields(obj map[string]any, allowed ...string) *apiError {
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
	return badRequest(CodeUnknownField, keys[0], "unknown field %q; known fields are %s", keys[0], strings.Join(allowed, ", "))
}

// canonicalJSON encodes a tree from parseObject with sorted keys, no
// insignificant whitespace and no HTML escaping. json.Number keeps the
// literal the client wrote; json.RawMessage is copied compacted.
func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// parseObject parses body, which must be exactly one JSON object, into
// map[string]any / []any / string / json.Number / bool / nil. Unlike
// json.Unmarshal it refuses duplicate keys (which would make "the same
// body" ambiguous), bounds the depth, and never echoes input bytes in its
// errors (a syntax error could sit inside a secret).
func parseObject(body []byte) (map[string]any, *apiError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	p := &parser{dec: dec}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, badRequest(CodeInvalidJSON, "", "body is empty; want a JSON object")
		}
		return nil, p.syntaxError()
	}
	if tok != json.Delim('{') {
		return nil, badRequest(CodeInvalidJSON, "", "body must be a JSON object")
	}
	obj, aerr := p.object()
	if aerr != nil {
		return nil, aerr
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest(CodeInvalidJSON, "", "unexpected data after the JSON object (at byte %d)", dec.InputOffset())
	}
	return obj, nil
}

type parser struct {
	dec  *json.Decoder
	path []pathElem // where the parser is, for error fields
}

type pathElem struct {
	key   string
	index int // when key == "" and isIndex
	isIdx bool
}

func (p *parser) field() string {
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

func (p *parser) syntaxError() *apiError {
	return badRequest(CodeInvalidJSON, "", "body is not valid JSON (at byte %d)", p.dec.InputOffset())
}

func (p *parser) value() (any, *apiError) {
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
func (p *parser) object() (map[string]any, *apiError) {
	if len(p.path) >= MaxJSONDepth {
		return nil, badRequest(CodeInvalidJSON, p.field(), "JSON nested deeper than %d levels", MaxJSONDepth)
	}
	obj := map[string]any{}
	for p.dec.More() {
		tok, err := p.dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, p.syntaxError()
		}
		p.path = append(p.path, pathElem{key: key})
		if _, dup := obj[key]; dup {
			return nil, badRequest(CodeInvalidJSON, p.field(), "duplicate key %q", key)
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
func (p *parser) array() ([]any, *apiError) {
	if len(p.path) >= MaxJSONDepth {
		return nil, badRequest(CodeInvalidJSON, p.field(), "JSON nested deeper than %d levels", MaxJSONDepth)
	}
	arr := []any{}
	for i := 0; p.dec.More(); i++ {
		p.path = append(p.path, pathElem{index: i, isIdx: true})
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
