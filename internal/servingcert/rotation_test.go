package servingcert

import (
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day    = 24 * time.Hour
	policy = Policy{CAValidity: 300 * day, LeafValidity: 90 * day, Overlap: time.Hour, DNSNames: []string{"hookkeeper-api.ns.svc", "hookkeeper-api.ns.svc.cluster.local"}}
)

func mustCA(t *testing.T, at time.Time) keyPair {
	t.Helper()
	ca, err := newCA(at, policy.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustLeaf(t *testing.T, ca keyPair, at time.Time, names ...string) keyPair {
	t.Helper()
	if names == nil {
		names = policy.DNSNames
	}
	leaf, err := newLeaf(ca, names, at, policy.LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func TestDecide(t *testing.T) {
	a := mustCA(t, t0)
	b := mustCA(t, t0.Add(201*day)) // added when A was two thirds through
	stranger := mustCA(t, t0)
	leafA := mustLeaf(t, a, t0)
	leafA200 := mustLeaf(t, a, t0.Add(200*day))
	leafB := mustLeaf(t, b, t0.Add(201*day+time.Hour))
	bOverlap := issuedAt(b.cert).Add(time.Hour)

	tests := []struct {
		name      string
		cas       []keyPair
		leaf      *keyPair
		now       time.Time
		keep      []int
		newCA     bool
		issueLeaf bool
		signer    int
		next      time.Time // zero: not checked
	}{
		{name: "nothing yet: a CA and a certificate", now: t0, keep: nil, newCA: true, issueLeaf: true, signer: 0},
		{name: "a CA without a certificate", cas: []keyPair{a}, now: t0.Add(time.Minute), keep: []int{0}, issueLeaf: true},
		{name: "fresh: nothing to do until the certificate is two thirds through", cas: []keyPair{a}, leaf: &leafA, now: t0.Add(day), keep: []int{0}, next: renewAt(leafA.cert)},
		{name: "certificate two thirds through: renewed by the same CA", cas: []keyPair{a}, leaf: &leafA, now: renewAt(leafA.cert), keep: []int{0}, issueLeaf: true},
		{name: "certificate for other names: reissued", cas: []keyPair{a}, leaf: ptr(mustLeaf(t, a, t0, "other.ns.svc")), now: t0.Add(day), keep: []int{0}, issueLeaf: true},
		{name: "certificate signed by a CA not in the bundle: reissued", cas: []keyPair{a}, leaf: ptr(mustLeaf(t, stranger, t0)), now: t0.Add(day), keep: []int{0}, issueLeaf: true},
		{name: "CA two thirds through: a new CA joins the bundle, the old one still signs", cas: []keyPair{a}, leaf: &leafA200, now: renewAt(a.cert), keep: []int{0}, newCA: true, signer: 0, next: renewAt(a.cert).Add(time.Hour)},
		{name: "new CA younger than the overlap: does not sign yet", cas: []keyPair{a, b}, leaf: &leafA200, now: bOverlap.Add(-time.Minute), keep: []int{0, 1}, signer: 0, next: bOverlap},
		{name: "new CA trusted for the overlap: it signs a new certificate, the old CA stays", cas: []keyPair{a, b}, leaf: &leafA200, now: bOverlap, keep: []int{0, 1}, issueLeaf: true, signer: 1},
		{name: "old CA kept while replicas may serve its certificate", cas: []keyPair{a, b}, leaf: &leafB, now: issuedAt(leafB.cert).Add(59 * time.Minute), keep: []int{0, 1}, signer: 1, next: issuedAt(leafB.cert).Add(time.Hour)},
		{name: "old CA retired once no certificate it signed is served", cas: []keyPair{a, b}, leaf: &leafB, now: issuedAt(leafB.cert).Add(time.Hour), keep: []int{1}, signer: 0},
		{name: "expired CA dropped (and the certificate, by then due, renewed)", cas: []keyPair{a, b}, leaf: &leafB, now: a.cert.NotAfter, keep: []int{1}, issueLeaf: true, signer: 0},
		{name: "everything expired: start over", cas: []keyPair{a}, leaf: &leafA, now: a.cert.NotAfter.Add(day), keep: nil, newCA: true, issueLeaf: true, signer: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := material{cas: tc.cas, leaf: tc.leaf}
			plan := Decide(tc.now, m.state(), policy)
			if !slices.Equal(plan.Keep, tc.keep) || plan.NewCA != tc.newCA || plan.IssueLeaf != tc.issueLeaf {
				t.Fatalf("plan keep=%v newCA=%v issueLeaf=%v (%v); want keep=%v newCA=%v issueLeaf=%v",
					plan.Keep, plan.NewCA, plan.IssueLeaf, plan.Reasons, tc.keep, tc.newCA, tc.issueLeaf)
			}
			if plan.IssueLeaf && plan.Signer != tc.signer {
				t.Errorf("signer = %d, want %d", plan.Signer, tc.signer)
			}
			if !tc.next.IsZero() && !plan.Next.Equal(tc.next) {
				t.Errorf("next review = %s, want %s", plan.Next, tc.next)
			}
			if !plan.Next.After(tc.now) {
				t.Errorf("next review %s is not after now %s", plan.Next, tc.now)
			}
			// Carrying out the plan leaves nothing to do at the same moment.
			after, err := apply(m, plan, tc.now, policy)
			if err != nil {
				t.Fatal(err)
			}
			if again := Decide(tc.now, after.state(), policy); again.Changes(after.state()) {
				t.Errorf("after carrying out the plan, Decide still wants changes: %v", again.Reasons)
			}
			if !verifies(after.leaf.cert, after.cas, tc.now) {
				t.Errorf("the resulting certificate does not verify against the resulting bundle")
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func verifies(leaf *x509.Certificate, bundle []keyPair, at time.Time) bool {
	roots := x509.NewCertPool()
	for _, ca := range bundle {
		roots.AddCert(ca.cert)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: at, DNSName: policy.DNSNames[0], KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}

// TestRotationNeverBreaksTrust runs the rotation for ten CA lifetimes,
// deciding whenever a plan says to, and checks at every change what keeps a
// rotation invisible to clients: the certificate is valid, a client holding
// the previous bundle trusts the new certificate, the new bundle trusts the
// previous certificate (a replica may still serve it), and the bundle stays
// small.
func TestRotationNeverBreaksTrust(t *testing.T) {
	var m material
	now := t0
	var rotations, rollovers int
	for now.Before(t0.Add(10 * policy.CAValidity)) {
		plan := Decide(now, m.state(), policy)
		if plan.Changes(m.state()) {
			next, err := apply(m, plan, now, policy)
			if err != nil {
				t.Fatal(err)
			}
			if !verifies(next.leaf.cert, next.cas, now) {
				t.Fatalf("%s: the certificate does not verify against its bundle", now)
			}
			if m.leaf != nil {
				if !verifies(next.leaf.cert, m.cas, now) {
					t.Fatalf("%s: a client with the previous bundle does not trust the new certificate (%v)", now, plan.Reasons)
				}
				if !verifies(m.leaf.cert, next.cas, now) {
					t.Fatalf("%s: the new bundle does not trust the previous certificate (%v)", now, plan.Reasons)
				}
			}
			if len(next.cas) > 2 {
				t.Fatalf("%s: the bundle holds %d CAs", now, len(next.cas))
			}
			if plan.IssueLeaf {
				rotations++
			}
			if plan.NewCA {
				rollovers++
			}
			m = next
		}
		if !now.Before(m.leaf.cert.NotAfter) {
			t.Fatalf("%s: the served certificate expired", now)
		}
		now = plan.Next
	}
	// 3000 days of 90-day certificates renewed after 60 days, 300-day CAs
	// after 200.
	if rotations < 50 || rollovers < 15 {
		t.Errorf("%d certificate rotations and %d CA rollovers in ten CA lifetimes; want at least 50 and 15", rotations, rollovers)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"leaf validity", func(p *Policy) { p.LeafValidity = 0 }, "serving certificate validity"},
		{"CA shorter than three leaves", func(p *Policy) { p.CAValidity = 2 * p.LeafValidity }, "CA validity"},
		{"no overlap", func(p *Policy) { p.Overlap = 0 }, "overlap"},
		{"overlap longer than a third", func(p *Policy) { p.Overlap = p.LeafValidity }, "overlap"},
		{"no names", func(p *Policy) { p.DNSNames = nil }, "DNS names"},
	} {
		p := policy
		tc.edit(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	if err := policy.Validate(); err != nil {
		t.Errorf("valid policy: %v", err)
	}
}
