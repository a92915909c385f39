package main

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/kubeauth"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// Values of --api-auth.
const (
	apiAuthKubernetes = "kubernetes"
	apiAuthTokenFile  = "token-file"
)

// apiOptions are the flags of the HTTP API: where it listens, how callers
// are authenticated, and its TLS certificate.
type apiOptions struct {
	addr       string
	auth       string
	tokenFile  string
	audiences  string
	certFile   string
	keyFile    string
	selfSigned bool
	// provisioned: TLS with the self-provisioned certificate
	// (--serving-cert-secret, cmd/servingcert.go).
	provisioned bool
	maxFanOut   int
	// filterEvalTimeout bounds one evaluation of an endpoint's filter.
	filterEvalTimeout time.Duration

	maxConnections       int
	maxUnprovenPerSource int
	maxBodyBytesInFlight int64
	// newTokenReviewsPerSource: first reviews of never-seen tokens a
	// second from one client address; 0 takes kubeauth's default.
	newTokenReviewsPerSource float64
	// tokenOutageGrace: how long a token and a permission reviewed before
	// are still accepted while the API server does not answer; 0 turns it
	// off (kubeauth.Options.OutageGrace).
	tokenOutageGrace time.Duration
}

func (o *apiOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "api-bind-address", ":8090", "Address of the HTTP API (publish events, read deliveries); \"0\" disables it. Without TLS it must be a loopback address.")
	fs.StringVar(&o.auth, "api-auth", apiAuthKubernetes, "How API callers are authenticated: \"kubernetes\" (bearer tokens checked with a TokenReview, permissions with a SubjectAccessReview: create on events.hookkeeper.dev to publish, get on webhookendpoints to read) or \"token-file\" (--api-token-file; local development and tests: a known token may do anything).")
	fs.StringVar(&o.tokenFile, "api-token-file", "", "With --api-auth=token-file: file of \"<token> <username>\" lines accepted as bearer tokens.")
	fs.StringVar(&o.audiences, "api-token-audiences", "", "With --api-auth=kubernetes: comma-separated audiences a token must be issued for (such as hookkeeper, for projected ServiceAccount tokens made for this API); empty accepts tokens for the API server's own audiences.")
	fs.StringVar(&o.certFile, "api-tls-cert-file", "", "PEM certificate (chain) the HTTP API serves, reloaded when it changes (a mounted kubernetes.io/tls Secret); with --api-tls-key-file.")
	fs.StringVar(&o.keyFile, "api-tls-key-file", "", "PEM private key of --api-tls-cert-file.")
	fs.IntVar(&o.maxFanOut, "max-fan-out", httpapi.DefaultMaxFanOut, "Most WebhookEndpoints one published event may be delivered to; an event whose type matches more endpoints in its namespace is refused whole (422 FanOutLimitExceeded), so that one publish cannot become an unbounded number of outbound requests.")
	fs.DurationVar(&o.filterEvalTimeout, "filter-eval-timeout", publish.DefaultFilterEvalTimeout, "Longest one evaluation of an endpoint's spec.filter may run on one event; past it the endpoint does not receive the event, and its owner is told (FilterOverBudget). Applies to both doors.")
	fs.IntVar(&o.maxConnections, "api-max-connections", httpapi.DefaultMaxConnections, "Most connections the HTTP API holds open, sized with the header limits so that stalled clients cannot take the manager past its memory limit (docs/operations/sizing.md#memory). At the cap a new connection closes the oldest unproven connection not serving a request (no request on it has authenticated) of the client address holding the most such connections, or is refused when there is none: a connection that authenticated is never closed for a new one.")
	fs.IntVar(&o.maxUnprovenPerSource, "api-max-unproven-connections-per-source", httpapi.DefaultMaxUnprovenConnectionsPerSource, "Most connections of one client address (an IPv6 one by its /64) on which no request has authenticated yet; beyond it a new connection from that address closes the address's oldest such connection not serving a request, or is refused. Connections that authenticated do not count. Raise it when many clients reach the API through one proxy address.")
	fs.Int64Var(&o.maxBodyBytesInFlight, "api-max-body-bytes-in-flight", httpapi.DefaultMaxBodyBytesInFlight, "Most bytes of request bodies the HTTP API reads or handles at once, each counted at its Content-Length; a request that does not fit is answered 503 Unavailable with Retry-After at once.")
	fs.Float64Var(&o.newTokenReviewsPerSource, "api-new-token-reviews-per-source", kubeauth.DefaultUnknownReviewsPerSourcePerSecond, "With --api-auth=kubernetes: TokenReviews a second of bearer tokens never seen before, per client address (burst twice that; in total at most 50/s); beyond it such requests are answered 503 with Retry-After, while known tokens are unaffected. Raise it when many clients reach the API through one proxy address.")
	fs.DurationVar(&o.tokenOutageGrace, "api-token-outage-grace", kubeauth.DefaultOutageGrace, "With --api-auth=kubernetes: while the Kubernetes API server does not answer (unreachable, timing out, failing), a bearer token it accepted and a permission it allowed within this time of their last review are still accepted, never past the token's own expiry; a token or permission without such a review is answered 503 with Retry-After. An answer of the API server (a token rejected, a permission denied) always counts at once. 0 turns it off: every request whose cached review is over is answered 503 during an outage.")
	fs.BoolVar(&o.selfSigned, "api-self-signed", false, "Serve the HTTP API over TLS with a certificate for 127.0.0.1, ::1 and localhost generated at start (local development; its SHA-256 fingerprint is logged).")
}

// enabled reports whether the API is served at all.
func (o *apiOptions) enabled() bool { return o.addr != "0" }

// validate checks the flags together. Plain HTTP is refused unless the API
// listens on loopback only: bearer tokens must not cross a network in
// clear.
func (o *apiOptions) validate() error {
	if !o.enabled() {
		return nil
	}
	switch o.auth {
	case apiAuthKubernetes:
		if o.tokenFile != "" {
			return errors.New("--api-token-file is only read with --api-auth=token-file")
		}
	case apiAuthTokenFile:
		if o.tokenFile == "" {
			return errors.New("--api-auth=token-file needs --api-token-file")
		}
		if o.audiences != "" {
			return errors.New("--api-token-audiences only applies to --api-auth=kubernetes")
		}
	default:
		return fmt.Errorf("--api-auth=%q: want %q or %q", o.auth, apiAuthKubernetes, apiAuthTokenFile)
	}
	if o.newTokenReviewsPerSource < 0 {
		return fmt.Errorf("--api-new-token-reviews-per-source=%v: want a positive rate", o.newTokenReviewsPerSource)
	}
	if o.tokenOutageGrace < 0 {
		return fmt.Errorf("--api-token-outage-grace=%s: want 0 (off) or a positive duration", o.tokenOutageGrace)
	}
	if o.maxFanOut < 1 {
		return fmt.Errorf("--max-fan-out=%d: want at least 1", o.maxFanOut)
	}
	if o.filterEvalTimeout <= 0 {
		return fmt.Errorf("--filter-eval-timeout=%s: want a positive duration", o.filterEvalTimeout)
	}
	if o.maxConnections < 1 {
		return fmt.Errorf("--api-max-connections=%d: want at least 1", o.maxConnections)
	}
	if o.maxUnprovenPerSource < 1 {
		return fmt.Errorf("--api-max-unproven-connections-per-source=%d: want at least 1", o.maxUnprovenPerSource)
	}
	if o.maxBodyBytesInFlight < httpapi.DefaultMaxBodyBytes {
		return fmt.Errorf("--api-max-body-bytes-in-flight=%d: want at least %d, the largest publish body, or no such publish could ever be read", o.maxBodyBytesInFlight, httpapi.DefaultMaxBodyBytes)
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("--api-tls-cert-file and --api-tls-key-file go together")
	}
	sources := 0
	for _, set := range []bool{o.certFile != "", o.selfSigned, o.provisioned} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		return errors.New("--api-tls-cert-file, --api-self-signed and --serving-cert-secret exclude each other: choose one source of the API's certificate")
	}
	if !o.tls() && !isLoopback(o.addr) {
		return fmt.Errorf("the HTTP API would serve bearer tokens in plain HTTP on %s: give --serving-cert-secret (a certificate the manager provisions), or --api-tls-cert-file and --api-tls-key-file (a mounted Secret of your own), or --api-self-signed for local development, or bind it to a loopback address such as 127.0.0.1:8090 (or disable it with --api-bind-address=0)", o.addr)
	}
	return nil
}

func (o *apiOptions) tls() bool { return o.certFile != "" || o.selfSigned || o.provisioned }

// isLoopback reports whether addr (host:port) listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// buildAuth returns the Auth of the --api-auth mode.
func (o *apiOptions) buildAuth(cfg *rest.Config, log logr.Logger) (httpapi.Auth, error) {
	if o.auth == apiAuthTokenFile {
		tokens, err := readTokens(o.tokenFile)
		if err != nil {
			return nil, err
		}
		if len(tokens) == 0 {
			log.Info("--api-token-file holds no token: every API request is refused with 401")
		}
		if !isLoopback(o.addr) {
			log.Info("WARNING: --api-auth=token-file lets every known token do anything; it is meant for local development and tests")
		}
		return tokens, nil
	}
	var audiences []string
	for a := range strings.SplitSeq(o.audiences, ",") {
		if a = strings.TrimSpace(a); a != "" {
			audiences = append(audiences, a)
		}
	}
	grace := o.tokenOutageGrace
	if grace == 0 {
		grace = -1 // off; kubeauth's zero is its default
	}
	return kubeauth.NewForConfig(cfg, kubeauth.Options{Audiences: audiences,
		UnknownReviewsPerSourcePerSecond: o.newTokenReviewsPerSource,
		UnknownReviewPerSourceBurst:      int(math.Ceil(2 * o.newTokenReviewsPerSource)),
		OutageGrace:                      grace})
}

// tlsConfig returns the API's TLS configuration, or nil for plain HTTP;
// with certificate files, also the watcher that reloads them (to start).
// provisioned is the self-provisioned certificate's source, with
// --serving-cert-secret.
func (o *apiOptions) tlsConfig(log logr.Logger, provisioned certificateSource) (*tls.Config, *certwatcher.CertWatcher, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only, like the metrics server by default (see
		// --enable-http2): producers gain little from HTTP/2 here.
		NextProtos: []string{"http/1.1"},
	}
	switch {
	case o.provisioned:
		if provisioned == nil {
			return nil, nil, errors.New("no self-provisioned certificate source (internal error)")
		}
		cfg.GetCertificate = provisioned.GetCertificate
		return cfg, nil, nil
	case o.certFile != "":
		cw, err := certwatcher.New(o.certFile, o.keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("loading the API's certificate (--api-tls-cert-file, --api-tls-key-file: is the Secret with your certificate mounted there?): %w", err)
		}
		cfg.GetCertificate = cw.GetCertificate
		return cfg, cw, nil
	case o.selfSigned:
		_, _, cert, err := selfSignedCertificate(selfSignedValidity)
		if err != nil {
			return nil, nil, fmt.Errorf("generating a self-signed certificate: %w", err)
		}
		fingerprint, pin := certificateFingerprints(cert.Leaf)
		log.Info("serving the HTTP API with a self-signed certificate for 127.0.0.1, ::1 and localhost (development only)",
			"sha256Fingerprint", fingerprint, "curlPinnedPubKey", pin)
		cfg.Certificates = []tls.Certificate{cert}
		return cfg, nil, nil
	}
	return nil, nil, nil
}

// certificateSource gives the certificate to present at each handshake,
// so that a rotated certificate is served without a restart.
type certificateSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// selfSignedValidity is how long a self-signed certificate is valid.
const selfSignedValidity = 365 * 24 * time.Hour

// selfSignedCertificate returns a fresh certificate for 127.0.0.1, ::1 and
// localhost, signed by a CA made for it alone (client-go's util/cert) and
// valid for maxAge, whose key exists only in this process: the chain and
// the key in PEM, and the pair parsed (with its Leaf).
func selfSignedCertificate(maxAge time.Duration) (certPEM, keyPEM []byte, pair tls.Certificate, err error) {
	certPEM, keyPEM, err = certutil.GenerateSelfSignedCertKeyWithOptions(certutil.SelfSignedCertKeyOptions{
		Host:         "127.0.0.1",
		AlternateIPs: []net.IP{net.IPv6loopback},
		AlternateDNS: []string{"localhost"},
		MaxAge:       maxAge,
	})
	if err != nil {
		return nil, nil, tls.Certificate{}, err
	}
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	return certPEM, keyPEM, pair, err
}

// certificateFingerprints returns the SHA-256 fingerprint of cert as
// openssl prints it (AB:CD:...) and its public key pin as curl's
// --pinnedpubkey takes it (sha256//base64).
func certificateFingerprints(cert *x509.Certificate) (fingerprint, pin string) {
	sum := sha256.Sum256(cert.Raw)
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return strings.Join(hexes, ":"), "sha256//" + base64.StdEncoding.EncodeToString(spki[:])
}
