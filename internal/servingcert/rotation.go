package servingcert

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Policy is how certificates are made and rotated.
type Policy struct {
	// CAValidity and LeafValidity are the lifetimes of a new CA and of a new
	// serving certificate. Each is renewed once two thirds of its lifetime
	// have passed, so a third of it is left to notice and fix a failure.
	CAValidity, LeafValidity time.Duration
	// Overlap is how long a new CA sits in the bundle before it signs, and
	// how long a CA stays in the bundle after the last certificate it signed
	// was replaced: time for every replica and every client (the
	// APIService's caBundle) to pick up the change. Rotation never leaves a
	// served certificate without its CA in the bundle.
	Overlap time.Duration
	// DNSNames the serving certificate is for.
	DNSNames []string
}

// Validate checks the policy, naming the setting at fault.
func (p Policy) Validate() error {
	if p.LeafValidity <= 0 {
		return fmt.Errorf("serving certificate validity %s: want more than 0", p.LeafValidity)
	}
	if p.CAValidity < 3*p.LeafValidity {
		return fmt.Errorf("CA validity %s: want at least three times the serving certificate validity (%s), so that a CA outlives the certificates it signs", p.CAValidity, p.LeafValidity)
	}
	if p.Overlap <= 0 || 3*p.Overlap > p.LeafValidity {
		return fmt.Errorf("overlap %s: want more than 0 and at most a third of the serving certificate validity (%s)", p.Overlap, p.LeafValidity)
	}
	if len(p.DNSNames) == 0 {
		return errors.New("DNS names: want at least one")
	}
	return nil
}

// State is what the Secret holds now: the CA bundle, oldest first, and the
// serving certificate (nil when there is none).
type State struct {
	CAs  []*x509.Certificate
	Leaf *x509.Certificate
}

// Plan is what to write: the CAs that stay in the bundle, whether a new CA
// joins it, which CA signs, and whether a new serving certificate is issued.
type Plan struct {
	// Keep are the indices in State.CAs of the CAs that stay, oldest first.
	Keep []int
	// NewCA appends a new CA to the bundle after the kept ones.
	NewCA bool
	// Signer is the index in the resulting bundle (Keep, then the new CA) of
	// the CA that signs a new serving certificate.
	Signer int
	// IssueLeaf issues a new serving certificate signed by Signer.
	IssueLeaf bool
	// Reasons say why, for the log.
	Reasons []string
	// Next is when to decide again at the latest.
	Next time.Time
}

// Changes reports whether the plan changes the Secret.
func (p Plan) Changes(s State) bool {
	return p.NewCA || p.IssueLeaf || len(p.Keep) != len(s.CAs)
}

// renewAt is when two thirds of c's lifetime have passed.
func renewAt(c *x509.Certificate) time.Time {
	start := issuedAt(c)
	return start.Add(c.NotAfter.Sub(start) * 2 / 3)
}

// Decide returns what to do with s at now under p. It is a pure function:
// every decision about rotation is here.
func Decide(now time.Time, s State, p Policy) Plan {
	var plan Plan
	// Expired CAs leave the bundle: nothing they signed is valid any more.
	var live []*x509.Certificate
	for i, ca := range s.CAs {
		if now.Before(ca.NotAfter) {
			plan.Keep = append(plan.Keep, i)
			live = append(live, ca)
		} else {
			plan.Reasons = append(plan.Reasons, fmt.Sprintf("CA %q expired", ca.Subject.CommonName))
		}
	}
	switch {
	case len(live) == 0:
		plan.NewCA = true
		plan.Reasons = append(plan.Reasons, "no valid CA")
	case !now.Before(renewAt(live[len(live)-1])):
		plan.NewCA = true
		plan.Reasons = append(plan.Reasons, "the newest CA is two thirds through its lifetime")
	}

	// The signer is the newest CA every client has had time to trust; a new
	// CA signs only after Overlap. Without any, the oldest (the one trusted
	// longest; on the first start, the only one).
	plan.Signer = 0
	for i := len(live) - 1; i >= 0; i-- {
		if !now.Before(issuedAt(live[i]).Add(p.Overlap)) {
			plan.Signer = i
			break
		}
	}
	var signer *x509.Certificate
	if plan.Signer < len(live) {
		signer = live[plan.Signer]
	}

	switch leaf := s.Leaf; {
	case leaf == nil:
		plan.IssueLeaf, plan.Reasons = true, append(plan.Reasons, "no serving certificate")
	case signer == nil || leaf.CheckSignatureFrom(signer) != nil:
		plan.IssueLeaf, plan.Reasons = true, append(plan.Reasons, "the serving certificate is not signed by the current CA")
	case !now.Before(renewAt(leaf)):
		plan.IssueLeaf, plan.Reasons = true, append(plan.Reasons, "the serving certificate is two thirds through its lifetime")
	case !sameNames(leaf.DNSNames, p.DNSNames):
		plan.IssueLeaf, plan.Reasons = true, append(plan.Reasons, "the serving certificate is for other DNS names")
	}

	// CAs older than the signer stay while a replica may still serve a
	// certificate they signed: until Overlap after the newest certificate
	// was issued.
	leafIssued := now
	if !plan.IssueLeaf {
		leafIssued = issuedAt(s.Leaf)
	}
	if plan.Signer > 0 && !now.Before(leafIssued.Add(p.Overlap)) {
		for _, ca := range live[:plan.Signer] {
			plan.Reasons = append(plan.Reasons, fmt.Sprintf("CA %q retired", ca.Subject.CommonName))
		}
		plan.Keep = plan.Keep[plan.Signer:]
		live = live[plan.Signer:]
		plan.Signer = 0
	}

	plan.Next = nextReview(now, live, plan, leafIssued, s.Leaf, p)
	return plan
}

// nextReview is the earliest moment at which Decide would decide anything
// new about the planned state.
func nextReview(now time.Time, live []*x509.Certificate, plan Plan, leafIssued time.Time, leaf *x509.Certificate, p Policy) time.Time {
	var times []time.Time
	for _, ca := range live {
		times = append(times, ca.NotAfter, issuedAt(ca).Add(p.Overlap))
	}
	if plan.NewCA {
		times = append(times, now.Add(p.Overlap), now.Add(p.CAValidity*2/3))
	} else if len(live) > 0 {
		times = append(times, renewAt(live[len(live)-1]))
	}
	times = append(times, leafIssued.Add(p.Overlap))
	if plan.IssueLeaf || leaf == nil {
		times = append(times, now.Add(p.LeafValidity*2/3))
	} else {
		times = append(times, renewAt(leaf))
	}
	next := now.Add(p.LeafValidity)
	for _, t := range times {
		if t.After(now) && t.Before(next) {
			next = t
		}
	}
	return next
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
