package ledger

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"time"
)

// crockford is Crockford's base32 alphabet, lower-cased: sortable, no
// ambiguous letters.
var crockford = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix + "_" + 26 characters: 48 bits of milliseconds since
// the epoch followed by 80 random bits, so IDs sort by creation time (which
// keeps B-tree inserts local) and never collide in practice.
func NewID(prefix string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic("ledger: crypto/rand failed: " + err.Error())
	}
	return prefix + "_" + crockford.EncodeToString(b[:])
}
