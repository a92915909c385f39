package dispatch_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/wire"
	"github.com/hookkeeper/hookkeeper/internal/wire/wiretest"
)

// Every header an attempt carries that is not a static header is one the
// sender or the HTTP stack sets, so it must be in wire.ReservedHeaders:
// otherwise a static header of that name would be silently replaced (or
// sent twice).
func TestSendSetsOnlyReservedHeaders(t *testing.T) {
	rc := newReceiver(t, nil)
	req := signedRequest(t, rc.URL+"/hooks", mustSecret(t))
	req.DeliveryID = "dlv_1"
	req.ReplayUntil = time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	req.Headers = []wire.Header{{Name: "X-Tenant", Value: "acme"}}
	if res := fixedSender().Send(context.Background(), req); res.Err != nil {
		t.Fatalf("result %+v", res)
	}
	got := rc.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	set := []string{"host"} // the server moves Host out of the header map
	for name := range got[0].header {
		if !strings.EqualFold(name, "X-Tenant") {
			set = append(set, strings.ToLower(name))
		}
	}
	for _, name := range set {
		if !wire.Reserved(name) {
			t.Errorf("the attempt carries %s, which wire.ReservedHeaders does not reserve", name)
		}
	}
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "hookkeeper-delivery-id", "hookkeeper-replay-until", "content-type", "user-agent", "content-length"} {
		if !slices.Contains(set, name) {
			t.Errorf("the attempt lacks %s", name)
		}
	}
	// RFC 3339, UTC, whole seconds, rounded up.
	if got := got[0].header.Get(wire.ReplayUntilHeader); got != "2030-01-02T03:04:06Z" {
		t.Errorf("%s = %q, want 2030-01-02T03:04:06Z", wire.ReplayUntilHeader, got)
	}
}

// A static header with a reserved name, in any case, is refused: the
// attempt fails as InvalidRequest and nothing is sent, instead of the
// header being replaced without a word.
func TestSendRefusesReservedStaticHeaders(t *testing.T) {
	rc := newReceiver(t, nil)
	secret := mustSecret(t)
	for _, reserved := range wire.ReservedHeaders {
		for _, name := range wiretest.Cases(reserved) {
			req := signedRequest(t, rc.URL, secret)
			req.Headers = []wire.Header{{Name: "X-Tenant", Value: "acme"}, {Name: name, Value: "HEADERSECRET"}}
			res := fixedSender().Send(context.Background(), req)
			if res.Class != dispatch.InvalidRequest || res.Err == nil {
				t.Errorf("static header %s: result %+v, want InvalidRequest", name, res)
				continue
			}
			if !strings.Contains(res.Err.Error(), name) {
				t.Errorf("static header %s: the error does not name it: %v", name, res.Err)
			}
			assertRedacted(t, res.Err, "HEADERSECRET")
		}
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("%d attempts with a reserved static header reached the receiver", n)
	}
}

// An attempt to a URL CheckURL refuses is refused before any connection
// is dialled, whatever the rule it breaks.
func TestSendRefusesURLsWireRefuses(t *testing.T) {
	secret := mustSecret(t)
	for _, tc := range wiretest.URLCases {
		if tc.Want == nil {
			continue
		}
		req := signedRequest(t, tc.URL, secret)
		res := fixedSender().Send(context.Background(), req)
		if res.Class != dispatch.InvalidRequest || res.Err == nil {
			t.Errorf("url %q: result %+v, want InvalidRequest", tc.URL, res)
		}
	}
}
