package canonjson

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// plain marks the bytes a string's input keeps in its canonical form
// without a look: all but '"', '\\', control characters (refused raw) and
// 0xE2, which starts U+2028 and U+2029 (escaped).
var plain = func() (t [256]bool) {
	for c := 0x20; c < len(t); c++ {
		t[c] = c != '"' && c != '\\' && c != 0xE2
	}
	return t
}()

// str parses the string whose opening quote is at pos and writes its
// canonical form. verbatim reports that the canonical form is the input's
// bytes, which is then also the decoded string.
func (p *Parser) str() (verbatim bool, err error) {
	in := p.in
	out := append(p.out, '"')
	verbatim = true
	i := p.pos + 1
	run := i // start of the input not yet copied
	for {
		for i+8 <= len(in) && printable8(binary.LittleEndian.Uint64(in[i:])) {
			i += 8
		}
		if i >= len(in) {
			return false, p.syntax()
		}
		c := in[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			p.out = append(append(out, in[run:i]...), '"')
			p.pos = i + 1
			return verbatim, nil
		case c == '\\':
			r, n := unescape(in[i:])
			if n == 0 {
				return false, p.syntax()
			}
			out = appendRune(append(out, in[run:i]...), r)
			verbatim = false
			i += n
			run = i
		case c < 0x20:
			return false, p.syntax()
		default: // 0xE2: the input is valid UTF-8, so two more bytes follow
			if in[i+1] == 0x80 && in[i+2]&^1 == 0xA8 {
				out = append(append(out, in[run:i]...), '\\', 'u', '2', '0', '2', hex[in[i+2]&0xF])
				verbatim = false
				run = i + 3
			}
			i += 3
		}
	}
}

// printable8 reports whether the eight bytes of x are all printable ASCII
// other than '"' and '\\': most of a body's strings, copied eight bytes a
// step. Each term sets a byte's high bit for a byte to stop at: high
// already, below 0x20, or equal to '"' or '\\' (x^c is then 0 and 0-1
// borrows). A borrow can set a false bit only above a byte that stops the
// run anyway, so the answer is exact where it matters.
func printable8(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	return (x|(x-lo*0x20)|((x^lo*'"')-lo)|((x^lo*'\\')-lo))&hi == 0
}

// unescape decodes the escape at the start of b (b[0] is '\\') and returns
// the rune and the escape's length, 0 if it is not one JSON allows. Like
// encoding/json, a surrogate that is not the high half of an escaped pair
// decodes to U+FFFD and leaves the escape after it to stand on its own.
func unescape(b []byte) (rune, int) {
	if len(b) < 2 {
		return 0, 0
	}
	switch c := b[1]; c {
	case '"', '\\', '/':
		return rune(c), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(b[2:])
		switch {
		case r < 0:
			return 0, 0
		case r < 0xD800 || r >= 0xE000:
			return r, 6
		case r < 0xDC00 && len(b) >= 12 && b[6] == '\\' && b[7] == 'u':
			if r2 := hex4(b[8:]); 0xDC00 <= r2 && r2 < 0xE000 {
				return 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00), 12
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendRune writes r as encoding/json writes it inside a string without
// HTML escaping: control characters, '"' and '\\' escaped, U+2028 and
// U+2029 escaped (JSONP safety, whatever the setting), the rest as UTF-8.
func appendRune(dst []byte, r rune) []byte {
	switch {
	case r < utf8.RuneSelf:
		return appendASCII(dst, byte(r))
	case r == '\u2028' || r == '\u2029':
		return append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

func appendASCII(dst []byte, b byte) []byte {
	switch b {
	case '"', '\\':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if b < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
	}
	return append(dst, b)
}

// AppendString appends s as a JSON string the way encoding/json's Encoder
// with SetEscapeHTML(false) writes it (invalid UTF-8 as \ufffd), so that
// strings of a canonical document built around Object values match.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = appendASCII(append(dst, s[start:i]...), b)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = appendRune(append(dst, s[start:i]...), r)
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}

// String returns the decoded string of v, a canonical value of an Object;
// false when v is not a string.
func String(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s), true
	}
	return string(appendUnquoted(nil, s)), true
}

// appendUnquoted appends the decoded content s of a well-formed JSON string.
func appendUnquoted(dst, s []byte) []byte {
	for {
		j := bytes.IndexByte(s, '\\')
		if j < 0 {
			return append(dst, s...)
		}
		r, n := unescape(s[j:])
		if n == 0 { // not well formed after all: keep the rest as it is
			return append(dst, s...)
		}
		dst = utf8.AppendRune(append(dst, s[:j]...), r)
		s = s[j+n:]
	}
}
