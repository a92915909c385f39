package main

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// registerCertificateExpiry exports when the certificate the HTTP API
// serves expires, read through cfg on each scrape so that a certificate the
// watcher reloaded is the one reported. The alert "certificate close to
// expiry" (config/prometheus) reads it.
func registerCertificateExpiry(reg prometheus.Registerer, cfg *tls.Config) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookkeeper_api_certificate_expiry_timestamp_seconds",
		Help: "When the certificate the HTTP API serves expires (Unix seconds; 0: none could be read).",
	}, func() float64 { return certificateNotAfter(cfg) }))
}

// certificateNotAfter is the expiry of the certificate cfg serves, in Unix
// seconds, or 0 when it has none or it cannot be parsed.
func certificateNotAfter(cfg *tls.Config) float64 {
	var cert *tls.Certificate
	switch {
	case cfg.GetCertificate != nil:
		c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			return 0
		}
		cert = c
	case len(cfg.Certificates) > 0:
		cert = &cfg.Certificates[0]
	}
	if cert == nil || len(cert.Certificate) == 0 {
		return 0
	}
	leaf := cert.Leaf
	if leaf == nil {
		parsed, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return 0
		}
		leaf = parsed
	}
	return float64(leaf.NotAfter.Unix())
}
