// Package servingcert gives the manager a serving certificate without hand
// work: a CA and a serving certificate kept in a Secret the manager creates,
// rotated well before expiry, agreed on by every replica (optimistic
// concurrency on the Secret) and served through a dynamic source, so that a
// rotation needs no restart. It also keeps an APIService's caBundle current.
//
// The decisions (when to renew, what the bundle holds) are pure functions of
// the Secret's content and the time (rotation.go); the rest is the
// Kubernetes adapter around them.
package servingcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// backdate is how far before its issuance a certificate's NotBefore lies,
// so that a peer whose clock is a little behind still accepts it.
const backdate = 5 * time.Minute

// issuedAt is when a certificate made by this package was issued.
func issuedAt(c *x509.Certificate) time.Time { return c.NotBefore.Add(backdate) }

// keyPair is a certificate with its private key, both also as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// newCA returns a self-signed CA valid for validity from now.
func newCA(now time.Time, validity time.Duration) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "hookkeeper serving CA " + now.UTC().Format(time.RFC3339)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return issue(tmpl, nil)
}

// newLeaf returns a serving certificate for dnsNames signed by ca, valid for
// validity from now but never past the CA's own expiry.
func newLeaf(ca keyPair, dnsNames []string, now time.Time, validity time.Duration) (keyPair, error) {
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	cn := "hookkeeper"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
	}
	return issue(tmpl, &ca)
}

// issue makes a fresh ECDSA P-256 key and a certificate for it from tmpl,
// signed by parent (self-signed when nil).
func issue(tmpl *x509.Certificate, parent *keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return keyPair{}, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signerKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing a certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, fmt.Errorf("parsing a certificate just made: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encoding a key: %w", err)
	}
	return keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// parseCertificates returns every CERTIFICATE block of data, in order.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	return certs, nil
}

// parseKeys returns every PKCS#8 PRIVATE KEY block of data, in order.
func parseKeys(data []byte) ([]crypto.Signer, error) {
	var keys []crypto.Signer
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("a private key is not PKCS#8") // never the key itself
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("a private key cannot sign")
		}
		keys = append(keys, s)
	}
	return keys, nil
}

// matches reports whether key is the private key of cert.
func matches(cert *x509.Certificate, key crypto.Signer) bool {
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	return err == nil && bytes.Equal(pub, cert.RawSubjectPublicKeyInfo)
}
