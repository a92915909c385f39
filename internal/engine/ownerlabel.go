package engine

import (
	"regexp"
	"sync"
)

// Owner label values. An endpoint's owner (WebhookEndpoint spec.owner) is
// free text an admin chooses: as a label of a counter that never forgets a
// series, every distinct value is a series for the life of the process.
// ownerLabels bounds them: the first MaxOwnerLabels valid owners this
// process counts keep their own value, every later one (and anything that
// breaks the CRD's pattern, which only a hand-edited ledger can hold)
// counts as OtherOwner. OtherOwner starts with "_", which the pattern
// refuses, so it never names a real owner.
const (
	MaxOwnerLabels = 64
	OtherOwner     = "_other"
)

// ownerPattern is the CRD's validation of spec.owner (api/v1alpha1,
// WebhookEndpointSpec.Owner): 1-63 characters.
var ownerPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._@+-]*[A-Za-z0-9])?$`)

// validOwner reports whether owner is a value spec.owner can hold; "" (no
// owner) is valid and stays "" (Prometheus treats it as no label).
func validOwner(owner string) bool {
	return owner == "" || (len(owner) <= 63 && ownerPattern.MatchString(owner))
}

// ownerLabels maps owners to bounded label values. The zero value is not
// usable: use newOwnerLabels.
type ownerLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
}

func newOwnerLabels(max int) *ownerLabels {
	return &ownerLabels{max: max, seen: make(map[string]struct{}, max)}
}

// value is owner's label value: owner itself if valid and among the first
// max distinct owners seen, else OtherOwner. "" is not counted.
func (o *ownerLabels) value(owner string) string {
	if owner == "" {
		return ""
	}
	if !validOwner(owner) {
		return OtherOwner
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[owner]; ok {
		return owner
	}
	if len(o.seen) >= o.max {
		return OtherOwner
	}
	o.seen[owner] = struct{}{}
	return owner
}
