package engine

// OwnerLabels bounds the owner label of a counter kept outside the engine
// (the controllers' circuit-breaker metrics) by the engine's rule
// (ownerLabels): the first MaxOwnerLabels valid owners keep their value,
// later ones and invalid ones count as OtherOwner.
type OwnerLabels struct{ labels *ownerLabels }

// NewOwnerLabels returns an OwnerLabels with room for MaxOwnerLabels
// owners.
func NewOwnerLabels() *OwnerLabels { return &OwnerLabels{newOwnerLabels(MaxOwnerLabels)} }

// Value is owner's label value; "" stays "" (no owner).
func (l *OwnerLabels) Value(owner string) string { return l.labels.value(owner) }

// OwnerLabel is the owner label of a per-endpoint series (one endpoint has
// one owner at a time, so the series stay bounded by the endpoints): the
// owner itself, or OtherOwner for a value spec.owner cannot hold.
func OwnerLabel(owner string) string {
	if !validOwner(owner) {
		return OtherOwner
	}
	return owner
}
