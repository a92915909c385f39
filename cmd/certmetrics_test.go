package main

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The expiry gauge reports the certificate being served: the self-signed
// one, and with files the one the watcher last loaded (a renewed
// certificate moves the gauge without a restart).
func TestAPICertificateExpiryGauge(t *testing.T) {
	t.Run("self-signed", func(t *testing.T) {
		cfg, _, err := (&apiOptions{selfSigned: true}).tlsConfig(logr.Discard(), nil)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		if err := registerCertificateExpiry(reg, cfg); err != nil {
			t.Fatal(err)
		}
		if got, want := gatherExpiry(t, reg), float64(cfg.Certificates[0].Leaf.NotAfter.Unix()); got != want {
			t.Errorf("expiry %v, want %v", got, want)
		}
	})
	t.Run("files, reloaded", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		write := func(maxAge time.Duration) float64 {
			certPEM, key, cert, err := selfSignedCertificate(maxAge)
			if err != nil {
				t.Fatal(err)
			}
			// The key first: the watcher reloads on the certificate's write.
			if err := os.WriteFile(keyFile, key, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			return float64(cert.Leaf.NotAfter.Unix())
		}
		first := write(selfSignedValidity)
		cfg, watcher, err := (&apiOptions{certFile: certFile, keyFile: keyFile}).tlsConfig(logr.Discard(), nil)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		if err := registerCertificateExpiry(reg, cfg); err != nil {
			t.Fatal(err)
		}
		if got := gatherExpiry(t, reg); got != first {
			t.Fatalf("expiry %v, want %v", got, first)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = watcher.Start(ctx) }()
		// Renewed a day later: the gauge follows the file.
		renewed := write(selfSignedValidity + 24*time.Hour)
		deadline := time.Now().Add(20 * time.Second)
		for gatherExpiry(t, reg) != renewed {
			if time.Now().After(deadline) {
				t.Fatalf("expiry still %v after the renewal, want %v", gatherExpiry(t, reg), renewed)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("none", func(t *testing.T) {
		if got := certificateNotAfter(&tls.Config{}); got != 0 {
			t.Errorf("no certificate: %v, want 0", got)
		}
	})
}

func gatherExpiry(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	if n := testutil.CollectAndCount(reg, "hookkeeper_api_certificate_expiry_timestamp_seconds"); n != 1 {
		t.Fatalf("%d series, want 1", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return families[0].GetMetric()[0].GetGauge().GetValue()
}
