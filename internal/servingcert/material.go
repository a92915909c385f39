package servingcert

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"
)

// Keys of the Secret. tls.crt, tls.key and ca.crt are laid out as
// cert-manager and kubernetes.io/tls Secrets lay them out; ca.key holds the
// private keys of the CAs of ca.crt, in the same order.
const (
	KeyCert     = "tls.crt"
	KeyKey      = "tls.key"
	KeyCABundle = "ca.crt"
	KeyCAKeys   = "ca.key"
)

// material is the content of the Secret, parsed.
type material struct {
	cas  []keyPair // oldest first
	leaf *keyPair
}

// state is what Decide needs of m.
func (m material) state() State {
	s := State{}
	for _, ca := range m.cas {
		s.CAs = append(s.CAs, ca.cert)
	}
	if m.leaf != nil {
		s.Leaf = m.leaf.cert
	}
	return s
}

// data returns m as Secret data.
func (m material) data() map[string][]byte {
	var certs, keys bytes.Buffer
	for _, ca := range m.cas {
		certs.Write(ca.certPEM)
		keys.Write(ca.keyPEM)
	}
	d := map[string][]byte{KeyCABundle: certs.Bytes(), KeyCAKeys: keys.Bytes()}
	if m.leaf != nil {
		d[KeyCert], d[KeyKey] = m.leaf.certPEM, m.leaf.keyPEM
	}
	return d
}

// bundle is the PEM CA bundle clients trust.
func (m material) bundle() []byte { return m.data()[KeyCABundle] }

// parseMaterial reads Secret data. A Secret that does not hold a consistent
// bundle and certificate is an error; the message never holds key material.
func parseMaterial(d map[string][]byte) (material, error) {
	var m material
	cas, err := parseCertificates(d[KeyCABundle])
	if err != nil {
		return m, fmt.Errorf("%s: %w", KeyCABundle, err)
	}
	keys, err := parseKeys(d[KeyCAKeys])
	if err != nil {
		return m, fmt.Errorf("%s: %w", KeyCAKeys, err)
	}
	if len(cas) == 0 || len(cas) != len(keys) {
		return m, fmt.Errorf("%s holds %d certificates and %s %d keys: want as many, at least one", KeyCABundle, len(cas), KeyCAKeys, len(keys))
	}
	for i, ca := range cas {
		if !ca.IsCA || !matches(ca, keys[i]) {
			return m, fmt.Errorf("%s: certificate %d is not a CA or does not match key %d of %s", KeyCABundle, i, i, KeyCAKeys)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(keys[i])
		if err != nil {
			return m, fmt.Errorf("%s: key %d cannot be encoded", KeyCAKeys, i)
		}
		m.cas = append(m.cas, keyPair{
			cert:    ca,
			key:     keys[i],
			certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
			keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		})
	}
	if len(d[KeyCert]) == 0 && len(d[KeyKey]) == 0 {
		return m, nil
	}
	pair, err := tls.X509KeyPair(d[KeyCert], d[KeyKey])
	if err != nil {
		return m, fmt.Errorf("%s and %s are not a certificate and its key", KeyCert, KeyKey)
	}
	m.leaf = &keyPair{cert: pair.Leaf, certPEM: d[KeyCert], keyPEM: d[KeyKey]}
	return m, nil
}

// apply carries out plan on m at now, making the keys and certificates it
// asks for.
func apply(m material, plan Plan, now time.Time, p Policy) (material, error) {
	var out material
	for _, i := range plan.Keep {
		out.cas = append(out.cas, m.cas[i])
	}
	if plan.NewCA {
		ca, err := newCA(now, p.CAValidity)
		if err != nil {
			return out, fmt.Errorf("making a CA: %w", err)
		}
		out.cas = append(out.cas, ca)
	}
	out.leaf = m.leaf
	if plan.IssueLeaf {
		leaf, err := newLeaf(out.cas[plan.Signer], p.DNSNames, now, p.LeafValidity)
		if err != nil {
			return out, fmt.Errorf("making the serving certificate: %w", err)
		}
		out.leaf = &leaf
	}
	return out, nil
}
