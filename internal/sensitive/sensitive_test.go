package sensitive

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestBytesNeverPrinted checks every way a value reaches text by accident:
// each fmt verb, alone and nested in a struct, and JSON.
func TestBytesNeverPrinted(t *testing.T) {
	const secret = "whsec_do-not-print"
	b := Bytes(secret)
	type holder struct{ S Bytes }
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, arg := range []any{b, holder{b}, &holder{b}} {
			if out := fmt.Sprintf(verb, arg); strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", secret)) {
				t.Errorf("Sprintf(%q, %T) = %q: contains the secret", verb, arg, out)
			}
		}
	}
	out, err := json.Marshal(holder{b})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"S":null}` {
		t.Errorf("json.Marshal = %s, want the secret as null", out)
	}
	if string(b.Reveal()) != secret {
		t.Errorf("Reveal() = %q, want the secret", b.Reveal())
	}
}
