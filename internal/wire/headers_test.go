package wire_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/wire"
	"github.com/hookkeeper/hookkeeper/internal/wire/wiretest"
)

func TestCheckHeader(t *testing.T) {
	for _, tc := range wiretest.HeaderCases {
		err := wire.CheckHeader(tc.Name, tc.Value)
		if !errors.Is(err, tc.Want) || (tc.Want == nil) != (err == nil) {
			t.Errorf("CheckHeader(%q, %q) = %v, want %v", tc.Name, tc.Value, err, tc.Want)
		}
		if err != nil && tc.Value != "" && strings.Contains(err.Error(), tc.Value) {
			t.Errorf("CheckHeader(%q, %q) quotes the value: %v", tc.Name, tc.Value, err)
		}
	}
}

// Every byte is judged in the middle of a value as Go's HTTP client judges
// it (RFC 9110 field-vchar, obs-text, space and tab), and at either end
// without surrounding space or tab, which Go would trim off.
func TestCheckHeaderValueEveryByte(t *testing.T) {
	for b := 0; b < 256; b++ {
		c := string([]byte{byte(b)})
		inner := b == '\t' || (b >= 0x20 && b != 0x7f)
		if got := wire.CheckHeader("X-Test", "a"+c+"b") == nil; got != inner {
			t.Errorf("byte %#x inside a value: accepted = %v, want %v", b, got, inner)
		}
		edge := inner && b != ' ' && b != '\t'
		if got := wire.CheckHeader("X-Test", c+"b") == nil; got != edge {
			t.Errorf("byte %#x leading a value: accepted = %v, want %v", b, got, edge)
		}
		if got := wire.CheckHeader("X-Test", "a"+c) == nil; got != edge {
			t.Errorf("byte %#x ending a value: accepted = %v, want %v", b, got, edge)
		}
		token := b < 0x80 && (b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", rune(b)))
		if got := wire.CheckHeader("X"+c, "v") == nil; got != token {
			t.Errorf("byte %#x in a name: accepted = %v, want %v", b, got, token)
		}
	}
}

func TestReservedHeadersInAnyCase(t *testing.T) {
	for _, name := range wire.ReservedHeaders {
		if name != strings.ToLower(name) {
			t.Errorf("ReservedHeaders has %q: the list is in lower case", name)
		}
		for _, n := range wiretest.Cases(name) {
			if !wire.Reserved(n) {
				t.Errorf("Reserved(%q) = false", n)
			}
			if err := wire.CheckHeader(n, "v"); !errors.Is(err, wire.ErrHeaderReserved) {
				t.Errorf("CheckHeader(%q) = %v, want %v", n, err, wire.ErrHeaderReserved)
			}
		}
	}
	for _, n := range []string{"X-Webhook-Id", "Webhook-Ids", "Content-Type2", "Authorization", "X-Host"} {
		if wire.Reserved(n) {
			t.Errorf("Reserved(%q) = true", n)
		}
	}
}

func TestHeaderSetRefusesRepeatedNamesInAnyCase(t *testing.T) {
	for _, names := range [][]string{{"X-Tenant", "x-tenant"}, {"X-Tenant", "X-TENANT"}, {"a", "b", "A"}} {
		var s wire.HeaderSet
		var err error
		for _, n := range names {
			if err = s.Add(n, "v"); err != nil {
				break
			}
		}
		if !errors.Is(err, wire.ErrHeaderRepeated) {
			t.Errorf("adding %q: %v, want %v", names, err, wire.ErrHeaderRepeated)
		}
	}
	var s wire.HeaderSet
	for _, n := range []string{"X-A", "X-B", "X-AB"} {
		if err := s.Add(n, "v"); err != nil {
			t.Errorf("adding %q: %v", n, err)
		}
	}
	if err := s.Add("User-Agent", "v"); !errors.Is(err, wire.ErrHeaderReserved) {
		t.Errorf("adding User-Agent: %v, want %v", err, wire.ErrHeaderReserved)
	}
}

// The CRD's CEL rule lists the reserved names itself (api/ cannot import
// internal/); this keeps its list, and its message, equal to ReservedHeaders.
func TestCRDReservesTheSameHeaders(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "hookkeeper.dev_webhookendpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`self\.name\.lowerAscii\(\) in \[([^\]]*)\]`).FindAllSubmatch(data, -1)
	if len(m) != 1 {
		t.Fatalf("found %d reserved-header rules in the CRD, want 1", len(m))
	}
	var crd []string
	for _, q := range strings.Split(string(m[0][1]), ",") {
		crd = append(crd, strings.Trim(strings.TrimSpace(q), "'"))
	}
	if !slices.Equal(crd, wire.ReservedHeaders) {
		t.Errorf("the CRD reserves %q\nwire.ReservedHeaders is %q", crd, wire.ReservedHeaders)
	}
	if msg := wire.ErrHeaderReserved.Error(); !strings.Contains(strings.Join(strings.Fields(string(data)), " "), msg) {
		t.Errorf("the CRD's message is not %q", msg)
	}
}
