// Package sensitive holds the type of secret bytes (signing secrets, an
// event's one-time secrets) that the ledger stores, the signer keys with
// and the sender merges into a body, so that the crypto and the wire need
// not import the storage to name it.
//
// It imports nothing of hookkeeper: it is a leaf.
package sensitive

import "fmt"

// Bytes holds secret bytes. It formats as "[redacted]" with every fmt verb
// and marshals to JSON as null, so that it cannot leak through a log line,
// an error message or an API answer by accident. Read it with Reveal.
type Bytes []byte

// Reveal returns the secret bytes.
func (s Bytes) Reveal() []byte { return s }

// Format implements fmt.Formatter.
func (s Bytes) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[redacted]")) }

// MarshalJSON implements json.Marshaler.
func (s Bytes) MarshalJSON() ([]byte, error) { return []byte("null"), nil }
