package dispatch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
)

// tableResolver answers from a table, as DNS would; other names are not
// found.
type tableResolver map[string]string

func (r tableResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

// The names the tests resolve: two to the cloud metadata address (one in
// its IPv4-mapped form, which a URL cannot name: wire.CheckURL refuses
// it), one to the loopback receivers the tests run.
var testDNS = tableResolver{"metadata.test": "169.254.169.254", "mapped-metadata.test": "::ffff:169.254.169.254", "receiver.test": "127.0.0.1"}

// viaName rewrites a receiver's http://127.0.0.1:port URL to use host.
func viaName(t *testing.T, rawURL, host string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String()
}

var defaultRetryOn = []string{"NetworkError", "Timeout", "408", "429", "5xx"}

func TestGuardedSenderRefusesForbiddenDestinationsAtDialTime(t *testing.T) {
	rcv := newReceiver(t, nil)
	s := dispatch.NewGuardedSender(destination.New(destination.Options{Resolver: testDNS}))

	tests := []struct {
		name, url, want string
	}{
		{"a name that resolves to the metadata address", "http://metadata.test/latest/meta-data/iam?token=s3cr3t-q",
			"metadata.test resolves to 169.254.169.254, a cloud metadata address"},
		{"the metadata address itself", "http://169.254.169.254/latest/meta-data/iam?token=s3cr3t-q",
			"169.254.169.254, a cloud metadata address"},
		{"a name that resolves to the IPv4-mapped metadata address", "http://mapped-metadata.test/latest/meta-data/iam?token=s3cr3t-q",
			"169.254.169.254, a cloud metadata address"},
		{"a loopback receiver by address", rcv.URL + "/hooks/s3cr3t-q", "127.0.0.1, a loopback address"},
		{"a loopback receiver by name", viaName(t, rcv.URL, "receiver.test") + "/hooks/s3cr3t-q",
			"receiver.test resolves to 127.0.0.1, a loopback address"},
		{"localhost", "http://[::1]:1/hooks/s3cr3t-q", "::1, a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.Send(context.Background(), signedRequest(t, tt.url, mustSecret(t)))
			if res.Class != dispatch.ForbiddenDestination || res.StatusCode != 0 {
				t.Fatalf("result %+v, want ForbiddenDestination", res)
			}
			var fe *destination.ForbiddenError
			if !errors.As(res.Err, &fe) {
				t.Errorf("error %v does not hold the ForbiddenError", res.Err)
			}
			if msg := res.Err.Error(); !strings.Contains(msg, tt.want) || !strings.Contains(msg, "--allowed-destination-cidrs") {
				t.Errorf("error %q does not say %q and how to allow it", msg, tt.want)
			}
			assertRedacted(t, res.Err, "s3cr3t-q", "meta-data", "/hooks")
			// Never retried, whatever the policy retries.
			if got := dispatch.Classify(res, append(defaultRetryOn, "ForbiddenDestination")); got != dispatch.NonRetryable {
				t.Errorf("Classify = %v, want NonRetryable", got)
			}
		})
	}
	if n := rcv.conns.Load(); n != 0 {
		t.Errorf("the loopback receiver saw %d connections: the refusal came after dialling", n)
	}
	if n := len(rcv.requests()); n != 0 {
		t.Errorf("the loopback receiver got %d requests", n)
	}
}

func TestGuardedSenderDeliversWhereAllowed(t *testing.T) {
	rcv := newReceiver(t, nil)
	allowed, err := destination.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	s := dispatch.NewGuardedSender(destination.New(destination.Options{Allowed: allowed, Resolver: testDNS}))
	for _, u := range []string{rcv.URL, viaName(t, rcv.URL, "receiver.test")} {
		res := s.Send(context.Background(), signedRequest(t, u+"/hooks", mustSecret(t)))
		if res.Err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: result %+v, want a 204", u, res)
		}
	}
	if n := len(rcv.requests()); n != 2 {
		t.Errorf("the receiver got %d requests, want 2", n)
	}
	// Allowing loopback allows loopback only.
	res := s.Send(context.Background(), signedRequest(t, "http://metadata.test/latest/meta-data", mustSecret(t)))
	if res.Class != dispatch.ForbiddenDestination {
		t.Errorf("metadata.test: result %+v, want ForbiddenDestination", res)
	}
	// A name that does not resolve is a network error, retried as usual.
	res = s.Send(context.Background(), signedRequest(t, "http://unknown.test/", mustSecret(t)))
	if res.Class != dispatch.NetworkError {
		t.Errorf("unknown.test: result %+v, want NetworkError", res)
	}
}

// A redirect towards a forbidden address is a 3xx like any other: the
// guarded sender does not follow it either.
func TestGuardedSenderDoesNotFollowRedirectsToMetadata(t *testing.T) {
	allowed, err := destination.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	redirect := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
	})
	s := dispatch.NewGuardedSender(destination.New(destination.Options{Allowed: allowed}))
	res := s.Send(context.Background(), signedRequest(t, redirect.URL, mustSecret(t)))
	if res.StatusCode != http.StatusFound || res.Err != nil {
		t.Fatalf("result %+v, want the 302 itself", res)
	}
}
