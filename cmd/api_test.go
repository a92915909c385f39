package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/kubeauth"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

func TestAPIFlagsValidate(t *testing.T) {
	ok := []apiOptions{
		{addr: "0", auth: "nonsense"}, // disabled: nothing else matters
		{addr: "127.0.0.1:8090", auth: apiAuthKubernetes},
		{addr: "[::1]:8090", auth: apiAuthKubernetes},
		{addr: "localhost:8090", auth: apiAuthTokenFile, tokenFile: "tokens"},
		{addr: ":8090", auth: apiAuthKubernetes, certFile: "c", keyFile: "k"},
		{addr: ":8090", auth: apiAuthKubernetes, selfSigned: true, audiences: "hookkeeper"},
		{addr: "0.0.0.0:8090", auth: apiAuthTokenFile, tokenFile: "tokens", selfSigned: true},
		{addr: ":8090", auth: apiAuthKubernetes, provisioned: true},
	}
	for _, o := range ok {
		withDefaultLimits(&o)
		if err := o.validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := map[string]apiOptions{
		"plain HTTP":                    {addr: ":8090", auth: apiAuthKubernetes},
		"plain HTTP on 0.0.0.0":         {addr: "0.0.0.0:8090", auth: apiAuthKubernetes},
		"plain HTTP on a pod IP":        {addr: "10.1.2.3:8090", auth: apiAuthTokenFile, tokenFile: "t"},
		"unknown mode":                  {addr: "127.0.0.1:8090", auth: "oidc"},
		"token file without the mode":   {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, tokenFile: "t"},
		"token-file mode without file":  {addr: "127.0.0.1:8090", auth: apiAuthTokenFile},
		"audiences with token-file":     {addr: "127.0.0.1:8090", auth: apiAuthTokenFile, tokenFile: "t", audiences: "x"},
		"cert without key":              {addr: ":8090", auth: apiAuthKubernetes, certFile: "c"},
		"key without cert":              {addr: ":8090", auth: apiAuthKubernetes, keyFile: "k"},
		"self-signed and a certificate": {addr: ":8090", auth: apiAuthKubernetes, certFile: "c", keyFile: "k", selfSigned: true},
		"provisioned and a certificate": {addr: ":8090", auth: apiAuthKubernetes, certFile: "c", keyFile: "k", provisioned: true},
		"provisioned and self-signed":   {addr: ":8090", auth: apiAuthKubernetes, selfSigned: true, provisioned: true},
		"no fan-out at all":             {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, maxFanOut: -1},
		"no connections at all":         {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, maxConnections: -1},
		"no unproven connections":       {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, maxUnprovenPerSource: -1},
		"no room for a publish body":    {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, maxBodyBytesInFlight: httpapi.DefaultMaxBodyBytes - 1},
		"negative review rate":          {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, newTokenReviewsPerSource: -1},
		"no time for a filter":          {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, filterEvalTimeout: -1},
		"negative outage grace":         {addr: "127.0.0.1:8090", auth: apiAuthKubernetes, tokenOutageGrace: -time.Second},
	}
	for name, o := range bad {
		withDefaultLimits(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s (%+v): accepted", name, o)
		}
	}
	plain := apiOptions{addr: ":8090", auth: apiAuthKubernetes}
	withDefaultLimits(&plain)
	err := plain.validate()
	if err == nil || !strings.Contains(err.Error(), "--api-tls-cert-file") || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("the plain-HTTP refusal does not say what to do: %v", err)
	}
}

// withDefaultLimits fills the flags' defaults into zero limits, so that
// each case is refused (or not) for the reason it names.
func withDefaultLimits(o *apiOptions) {
	if o.maxFanOut == 0 {
		o.maxFanOut = httpapi.DefaultMaxFanOut
	}
	if o.maxConnections == 0 {
		o.maxConnections = httpapi.DefaultMaxConnections
	}
	if o.maxBodyBytesInFlight == 0 {
		o.maxBodyBytesInFlight = httpapi.DefaultMaxBodyBytesInFlight
	}
	if o.maxUnprovenPerSource == 0 {
		o.maxUnprovenPerSource = httpapi.DefaultMaxUnprovenConnectionsPerSource
	}
	if o.filterEvalTimeout == 0 {
		o.filterEvalTimeout = publish.DefaultFilterEvalTimeout
	}
}

func TestAPIFlagsDefaults(t *testing.T) {
	var o apiOptions
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.auth != apiAuthKubernetes || o.addr != ":8090" || o.tls() || o.maxFanOut != httpapi.DefaultMaxFanOut ||
		o.maxConnections != httpapi.DefaultMaxConnections || o.maxUnprovenPerSource != httpapi.DefaultMaxUnprovenConnectionsPerSource ||
		o.maxBodyBytesInFlight != httpapi.DefaultMaxBodyBytesInFlight || o.filterEvalTimeout != publish.DefaultFilterEvalTimeout ||
		o.newTokenReviewsPerSource != kubeauth.DefaultUnknownReviewsPerSourcePerSecond || o.tokenOutageGrace != kubeauth.DefaultOutageGrace {
		t.Errorf("defaults = %+v", o)
	}
	// The defaults alone do not start: :8090 is not loopback, and there is
	// no certificate.
	if o.validate() == nil {
		t.Error("the defaults serve plain HTTP on every interface")
	}
}

func TestSelfSignedAPIServesTLSForLoopback(t *testing.T) {
	var logs strings.Builder
	log := funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{})
	o := apiOptions{addr: "127.0.0.1:0", auth: apiAuthKubernetes, selfSigned: true}
	cfg, watcher, err := o.tlsConfig(log, nil)
	if err != nil || cfg == nil || watcher != nil {
		t.Fatalf("tlsConfig = %v, %v, %v", cfg, watcher, err)
	}
	leaf := cfg.Certificates[0].Leaf
	fingerprint, pin := certificateFingerprints(leaf)
	if !strings.Contains(logs.String(), fingerprint) || !strings.Contains(logs.String(), pin) || len(fingerprint) != 32*3-1 {
		t.Errorf("log %q lacks the fingerprint %s and pin %s", logs.String(), fingerprint, pin)
	}
	if time.Until(leaf.NotAfter) < 300*24*time.Hour {
		t.Errorf("certificate expires %v", leaf.NotAfter)
	}

	// A real TLS server with it, and a client that trusts exactly it.
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: cfg, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	})}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
		resp, err := client.Get("https://" + net.JoinHostPort(host, port) + "/")
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "HTTP/1.1" || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("%s: proto %s, TLS %+v", host, body, resp.TLS)
		}
	}
	// Two starts, two keys.
	other, _, err := o.tlsConfig(logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.Certificates[0].Leaf.Equal(leaf) {
		t.Error("the same certificate twice")
	}
}

func TestAPICertificateFilesMustExist(t *testing.T) {
	dir := t.TempDir()
	o := apiOptions{addr: ":8090", auth: apiAuthKubernetes, certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	_, _, err := o.tlsConfig(logr.Discard(), nil)
	if err == nil || !strings.Contains(err.Error(), "--api-tls-cert-file") {
		t.Errorf("missing certificate files: %v", err)
	}
}
