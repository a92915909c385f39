// Package canonjson parses a request body that must be one strict JSON
// object and writes its canonical form in the same pass: keys sorted by
// their decoded bytes, no insignificant whitespace, numbers as written,
// strings re-escaped exactly as encoding/json's Encoder with
// SetEscapeHTML(false) writes them.
//
// The canonical bytes are hashed as idempotency evidence and stored as the
// event's data, so they must stay byte for byte what the API produced when
// it decoded bodies into a map[string]any and re-marshalled them; and the
// errors, including their byte offsets, are those json.Decoder.Token gave.
// internal/publish keeps that old implementation in its tests as the oracle
// of a differential test and a fuzz test. The point of this package is
// cost: no generic tree, no reflection, and no allocation per value.
package canonjson

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrorKind says which rule a body broke.
type ErrorKind int

// The rules, in the order they are checked: a body is first UTF-8, then
// not empty, then an object, then well-formed inside (syntax, depth,
// duplicate keys, in the order met), and then has nothing after it.
const (
	InvalidUTF8 ErrorKind = iota + 1
	Empty
	NotObject
	Syntax       // Offset: where json.Decoder's InputOffset stood
	Depth        // Path: the container nested too deep
	DuplicateKey // Path: the second occurrence; Key: the decoded key
	TrailingData // Offset: after the token that follows the object
)

// Error is a refused body. It never holds input bytes other than a
// duplicate key, which callers may echo: keys are names, not values.
type Error struct {
	Kind   ErrorKind
	Offset int
	Path   string
	Key    string
}

func (e *Error) Error() string {
	switch e.Kind {
	case InvalidUTF8:
		return "body is not UTF-8"
	case Empty:
		return "body is empty"
	case NotObject:
		return "body is not a JSON object"
	case Syntax:
		return fmt.Sprintf("invalid JSON at byte %d", e.Offset)
	case Depth:
		return fmt.Sprintf("JSON nested too deep at %s", e.Path)
	case DuplicateKey:
		return fmt.Sprintf("duplicate key %q at %s", e.Key, e.Path)
	case TrailingData:
		return fmt.Sprintf("data after the JSON object at byte %d", e.Offset)
	}
	return "invalid JSON"
}

// Object is a parsed body. Canonical is the whole object in canonical
// form; Members are its top-level members sorted by key, each Value the
// canonical form of the member's value (a subslice of Canonical).
//
// Everything aliases the Parser's buffers or the parsed body: it is valid
// until the Parser's next Parse. Copy what you keep.
type Object struct {
	Canonical []byte
	Members   []Member
}

// Member is one top-level member: Key decoded, Value canonical.
type Member struct {
	Key   []byte
	Value []byte
}

// Get returns the canonical value of the member named key.
func (o *Object) Get(key string) ([]byte, bool) {
	for _, m := range o.Members {
		if string(m.Key) == key {
			return m.Value, true
		}
	}
	return nil, false
}

// Parser holds the buffers of Parse, reused from one body to the next;
// it is not safe for concurrent use (pool it).
type Parser struct {
	maxDepth int

	in  []byte
	pos int // json.Decoder's InputOffset: the end of the last token read
	out []byte

	// members of the objects still open, innermost last; an object's
	// members are sorted and dropped when it closes.
	members []member
	// keys holds decoded keys that differ from their input bytes. It is
	// only appended to during a Parse, so slices into it stay valid even
	// when it grows.
	keys    []byte
	path    []step
	scratch []byte
	seen    []map[string]struct{} // per depth, for objects with many members
	top     []Member
}

type member struct {
	key               []byte // decoded
	start, value, end int    // in out: `"key":value` is out[start:end], value from out[value:]
}

type step struct {
	key     []byte
	index   int
	isIndex bool
}

// seenAfter is how many members an object may have before its duplicate
// check moves from a linear scan to a map: a body of many members must not
// cost quadratic time, and most objects are far smaller.
const seenAfter = 16

// NewParser returns a Parser that refuses containers nested deeper than
// maxDepth (the top-level object is at depth 1).
func NewParser(maxDepth int) *Parser {
	return &Parser{maxDepth: maxDepth}
}

// Forget zeroes what p keeps of its last body (the canonical form, decoded
// keys, scratch space) and drops its references to the input, so that a
// parser kept for reuse holds no secret that body carried.
func (p *Parser) Forget() {
	clear(p.out[:cap(p.out)])
	clear(p.keys[:cap(p.keys)])
	clear(p.scratch[:cap(p.scratch)])
	p.in, p.out, p.keys, p.scratch = nil, p.out[:0], p.keys[:0], p.scratch[:0]
	clear(p.members[:cap(p.members)])
	clear(p.path[:cap(p.path)])
	clear(p.top[:cap(p.top)])
	p.members, p.path, p.top = p.members[:0], p.path[:0], p.top[:0]
	for _, m := range p.seen {
		clear(m)
	}
}

// Parse parses body, which must be exactly one UTF-8 JSON object with no
// duplicate keys at any depth. Errors are *Error.
func (p *Parser) Parse(body []byte) (Object, error) {
	// Checked first and whole, as before: an invalid byte anywhere wins over
	// any other error, and the string scanner below may then copy multibyte
	// sequences without decoding them.
	if !utf8.Valid(body) {
		return Object{}, &Error{Kind: InvalidUTF8}
	}
	p.in, p.pos = body, 0
	p.out, p.members, p.keys, p.path, p.top = p.out[:0], p.members[:0], p.keys[:0], p.path[:0], p.top[:0]

	c, ok := p.peek()
	switch {
	case !ok:
		return Object{}, &Error{Kind: Empty}
	case c == '[':
		// json.Decoder hands out '[' as a token: a valid start, just not an object.
		return Object{}, &Error{Kind: NotObject}
	case c == ']' || c == '}' || c == ':' || c == ',':
		return Object{}, p.syntax()
	case c != '{':
		if err := p.scalar(); err != nil {
			return Object{}, err
		}
		return Object{}, &Error{Kind: NotObject}
	}
	p.pos++
	if err := p.object(); err != nil {
		return Object{}, err
	}
	if err := p.trailing(); err != nil {
		return Object{}, err
	}
	for _, m := range p.members {
		p.top = append(p.top, Member{Key: m.key, Value: p.out[m.value:m.end]})
	}
	return Object{Canonical: p.out, Members: p.top}, nil
}

// trailing refuses anything but whitespace after the object. The offset is
// where json.Decoder stood after reading one more token: past a delimiter
// or a well-formed scalar, at anything else.
func (p *Parser) trailing() error {
	c, ok := p.peek()
	if !ok {
		return nil
	}
	at := p.pos
	switch c {
	case '{', '[':
		at++
	case ']', '}', ':', ',':
	default:
		if p.scalar() == nil {
			at = p.pos
		}
	}
	return &Error{Kind: TrailingData, Offset: at}
}

// peek skips whitespace to the next byte. At the end of the input it
// leaves pos where it was, as json.Decoder does, so that an error there
// points just past the last token.
func (p *Parser) peek() (byte, bool) {
	for i := p.pos; i < len(p.in); i++ {
		switch c := p.in[i]; c {
		case ' ', '\t', '\r', '\n':
		default:
			p.pos = i
			return c, true
		}
	}
	return 0, false
}

func (p *Parser) syntax() error { return &Error{Kind: Syntax, Offset: p.pos} }

func (p *Parser) depth() error {
	return &Error{Kind: Depth, Path: p.field()}
}

// field names where the parser is: keys joined by '.', indexes in brackets.
func (p *Parser) field() string {
	var sb strings.Builder
	for i, s := range p.path {
		switch {
		case s.isIndex:
			sb.WriteString("[" + strconv.Itoa(s.index) + "]")
		case i == 0:
			sb.Write(s.key)
		default:
			sb.WriteByte('.')
			sb.Write(s.key)
		}
	}
	return sb.String()
}

// value parses the value that starts at the next token.
func (p *Parser) value() error {
	c, ok := p.peek()
	if !ok {
		return p.syntax()
	}
	switch c {
	case '{':
		p.pos++
		return p.object()
	case '[':
		p.pos++
		return p.array()
	case ']', '}', ':', ',':
		return p.syntax()
	}
	return p.scalar()
}

// object parses the members of an object whose '{' was read. Members are
// written in input order, `"key":value` separated by commas, and put in key
// order when the object closes (in place: the region's length is the same).
func (p *Parser) object() error {
	if len(p.path) >= p.maxDepth {
		return p.depth()
	}
	depth, start, base := len(p.path), len(p.out), len(p.members)
	p.out = append(p.out, '{')
	var seen map[string]struct{}
	for n := 0; ; n++ {
		c, ok := p.peek()
		if !ok || c == ']' || c == '}' {
			break
		}
		if n > 0 {
			if c != ',' {
				return p.syntax()
			}
			p.pos++
			if c, ok = p.peek(); !ok {
				return p.syntax()
			}
			p.out = append(p.out, ',')
		}
		if c != '"' {
			return p.syntax()
		}
		mstart := len(p.out)
		key, err := p.key()
		if err != nil {
			return err
		}
		p.path = append(p.path, step{key: key})
		// Refused as soon as the key is read, before its value, as before.
		if seen == nil && n == seenAfter {
			seen = p.seenSet(depth, base)
		}
		if p.duplicate(base, key, seen) {
			return &Error{Kind: DuplicateKey, Path: p.field(), Key: string(key)}
		}
		if seen != nil {
			seen[string(key)] = struct{}{}
		}
		if c, ok = p.peek(); !ok || c != ':' {
			return p.syntax()
		}
		p.pos++
		p.out = append(p.out, ':')
		vstart := len(p.out)
		if err := p.value(); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
		p.members = append(p.members, member{key: key, start: mstart, value: vstart, end: len(p.out)})
	}
	if c, ok := p.peek(); !ok || c != '}' {
		return p.syntax()
	}
	p.pos++
	p.out = append(p.out, '}')
	p.sortMembers(base, start)
	if len(p.path) > 0 {
		p.members = p.members[:base]
	}
	return nil
}

// seenSet returns the (reused) set of the open object at depth d, filled
// with its members so far.
func (p *Parser) seenSet(d, base int) map[string]struct{} {
	for len(p.seen) <= d {
		p.seen = append(p.seen, nil)
	}
	if p.seen[d] == nil {
		p.seen[d] = make(map[string]struct{})
	}
	s := p.seen[d]
	clear(s)
	for _, m := range p.members[base:] {
		s[string(m.key)] = struct{}{}
	}
	return s
}

func (p *Parser) duplicate(base int, key []byte, seen map[string]struct{}) bool {
	if seen != nil {
		_, dup := seen[string(key)]
		return dup
	}
	for _, m := range p.members[base:] {
		if bytes.Equal(m.key, key) {
			return true
		}
	}
	return false
}

func compareMembers(a, b member) int { return bytes.Compare(a.key, b.key) }

// sortMembers puts the members of the object written at out[start:] in key
// order, unless they already are.
func (p *Parser) sortMembers(base, start int) {
	ms := p.members[base:]
	if slices.IsSortedFunc(ms, compareMembers) {
		return
	}
	slices.SortFunc(ms, compareMembers)
	p.scratch = append(p.scratch[:0], p.out[start:]...)
	w := start + 1
	for i := range ms {
		m := &ms[i]
		if i > 0 {
			p.out[w] = ','
			w++
		}
		w += copy(p.out[w:], p.scratch[m.start-start:m.end-start])
		shift := w - m.end
		m.start, m.value, m.end = m.start+shift, m.value+shift, m.end+shift
	}
}

// array parses the elements of an array whose '[' was read.
func (p *Parser) array() error {
	if len(p.path) >= p.maxDepth {
		return p.depth()
	}
	p.out = append(p.out, '[')
	for i := 0; ; i++ {
		c, ok := p.peek()
		if !ok || c == ']' || c == '}' {
			break
		}
		if i > 0 {
			if c != ',' {
				return p.syntax()
			}
			p.pos++
			p.out = append(p.out, ',')
		}
		p.path = append(p.path, step{index: i, isIndex: true})
		if err := p.value(); err != nil {
			return err
		}
		p.path = p.path[:len(p.path)-1]
	}
	if c, ok := p.peek(); !ok || c != ']' {
		return p.syntax()
	}
	p.pos++
	p.out = append(p.out, ']')
	return nil
}

// key parses the object key at pos and returns it decoded.
func (p *Parser) key() ([]byte, error) {
	start, kstart := p.pos, len(p.out)
	verbatim, err := p.str()
	if err != nil {
		return nil, err
	}
	if verbatim {
		return p.in[start+1 : p.pos-1], nil
	}
	k := len(p.keys)
	p.keys = appendUnquoted(p.keys, p.out[kstart+1:len(p.out)-1])
	return p.keys[k:len(p.keys):len(p.keys)], nil
}

// scalar parses the string, number, true, false or null at pos. A scalar
// that is not well formed is a syntax error at its first byte, and it ends
// where json's scanner ends it: "truex" is true followed by x.
func (p *Parser) scalar() error {
	in := p.in[p.pos:]
	switch c := in[0]; {
	case c == '"':
		_, err := p.str()
		return err
	case c == '-' || '0' <= c && c <= '9':
		n := numberLen(in)
		if n == 0 {
			return p.syntax()
		}
		p.out = append(p.out, in[:n]...)
		p.pos += n
		return nil
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(in, []byte(lit)) {
			p.out = append(p.out, lit...)
			p.pos += len(lit)
			return nil
		}
	}
	return p.syntax()
}

// numberLen returns the length of the JSON number at the start of b, 0 if
// there is none.
func numberLen(b []byte) int {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return 0
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || !isDigit(b[i+1]) {
			return 0
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0
		}
		i = digits(b, i)
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
