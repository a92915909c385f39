package servingcert

import (
	"bytes"
	"strings"
	"testing"
)

func TestMaterialRoundTrip(t *testing.T) {
	a, b := mustCA(t, t0), mustCA(t, t0.Add(day))
	leaf := mustLeaf(t, b, t0.Add(day))
	m := material{cas: []keyPair{a, b}, leaf: &leaf}
	got, err := parseMaterial(m.data())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.cas) != 2 || !got.cas[0].cert.Equal(a.cert) || !got.cas[1].cert.Equal(b.cert) || !got.leaf.cert.Equal(leaf.cert) {
		t.Fatalf("round trip changed the material")
	}
	if !bytes.Equal(got.bundle(), append(append([]byte{}, a.certPEM...), b.certPEM...)) {
		t.Errorf("the bundle is not the CAs' PEM in order")
	}
	// A CA key survives the round trip: it still signs.
	if _, err := newLeaf(got.cas[1], policy.DNSNames, t0.Add(2*day), policy.LeafValidity); err != nil {
		t.Errorf("signing with a parsed CA: %v", err)
	}
}

// TestMaterialRefusesInconsistentSecrets: each way a Secret can be broken is
// refused with a message that names the key at fault and holds no key
// material.
func TestMaterialRefusesInconsistentSecrets(t *testing.T) {
	a, b := mustCA(t, t0), mustCA(t, t0)
	leafA := mustLeaf(t, a, t0)
	good := material{cas: []keyPair{a}, leaf: &leafA}.data()
	edit := func(f func(d map[string][]byte)) map[string][]byte {
		d := map[string][]byte{}
		for k, v := range good {
			d[k] = v
		}
		f(d)
		return d
	}
	for name, tc := range map[string]struct {
		data map[string][]byte
		want string
	}{
		"empty":                        {map[string][]byte{}, KeyCABundle},
		"CA without its key":           {edit(func(d map[string][]byte) { delete(d, KeyCAKeys) }), KeyCAKeys},
		"CA key of another CA":         {edit(func(d map[string][]byte) { d[KeyCAKeys] = b.keyPEM }), KeyCABundle},
		"a serving certificate as CA":  {edit(func(d map[string][]byte) { d[KeyCABundle], d[KeyCAKeys] = leafA.certPEM, leafA.keyPEM }), "not a CA"},
		"certificate with another key": {edit(func(d map[string][]byte) { d[KeyKey] = b.keyPEM }), KeyCert},
		"certificate without a key":    {edit(func(d map[string][]byte) { delete(d, KeyKey) }), KeyCert},
		"garbage CA key": {edit(func(d map[string][]byte) {
			d[KeyCAKeys] = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		}), KeyCAKeys},
	} {
		_, err := parseMaterial(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(a.keyPEM[30:60])) {
			t.Errorf("%s: the error shows key material: %v", name, err)
		}
	}
	if _, err := parseMaterial(good); err != nil {
		t.Errorf("a good Secret: %v", err)
	}
}
