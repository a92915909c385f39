package v1alpha1_test

import (
	"errors"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/wire"
	"github.com/hookkeeper/hookkeeper/internal/wire/wiretest"
)

// The CRD's rules for spec.url and spec.headers restate package wire's
// checks, which the controller, the engine's registration and the sender
// apply. These specs apply every case of package wire to the real API
// server and require the same verdict from both, and for a refusal the
// same rule, named with its field: an accepted url or header is one
// hookkeeper can send, a refused one is refused when it is applied, not
// when it is delivered.
var _ = Describe("WebhookEndpoint url and headers, as the API server and package wire see them", func() {
	var ns string
	n := 0
	create := func(url string, headers ...hookv1.Header) error {
		n++
		ep := &hookv1.WebhookEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("wire-%d", n)},
			Spec:       hookv1.WebhookEndpointSpec{URL: url, EventTypes: []hookv1.EventTypePattern{"*"}, Headers: headers},
		}
		return k8sClient.Create(ctx, ep)
	}
	// disagreement says how the API server's verdict on an object differs
	// from want (nil: accepted), or "": a refusal must name field and say
	// what want says, without showing hidden.
	disagreement := func(what string, err, want error, field string, hidden string) string {
		switch {
		case want == nil && err != nil:
			return fmt.Sprintf("%s: package wire accepts it, the API server refused it: %v", what, err)
		case want == nil:
			return ""
		case err == nil:
			return fmt.Sprintf("%s: package wire refuses it (%v), the API server accepted it", what, want)
		}
		msg, rule := err.Error(), want.Error()
		if errors.Is(want, wire.ErrURLLength) {
			rule = "may not be more than 2048"
		}
		switch {
		case !apierrors.IsInvalid(err) || !strings.Contains(msg, field) || !strings.Contains(msg, rule):
			return fmt.Sprintf("%s: refused as %q, want %s refused by %q", what, msg, field, rule)
		case hidden != "" && strings.Contains(msg, hidden):
			return fmt.Sprintf("%s: the refusal shows the value: %s", what, msg)
		}
		return ""
	}
	var disagreements []string
	expectSame := func(what string, err, want error, field string, hidden string) {
		if d := disagreement(what, err, want, field, hidden); d != "" {
			disagreements = append(disagreements, d)
		}
	}

	// wireSays: package wire's verdict is want's (nil: accepted), so that a
	// stale case fails here rather than passing on both sides.
	wireSays := func(what string, got, want error) {
		GinkgoHelper()
		if want == nil {
			Expect(got).NotTo(HaveOccurred(), "the case %s is stale", what)
		} else {
			Expect(got).To(MatchError(want), "the case %s is stale", what)
		}
	}

	BeforeEach(func() {
		ns = newNamespace()
		disagreements = nil
	})
	// Every case is applied before the verdict, so that a failure lists
	// every disagreement, not the first.
	AfterEach(func() {
		Expect(disagreements).To(BeEmpty(), "%d cases where the API server and package wire disagree", len(disagreements))
	})

	It("accepts exactly the urls package wire accepts, and refuses the others by the same rule", func() {
		for _, tc := range wiretest.URLCases {
			wireSays(fmt.Sprintf("%q", tc.URL), wire.CheckURL(tc.URL), tc.Want)
			expectSame(fmt.Sprintf("url %q", tc.URL), create(tc.URL), tc.Want, "spec.url", "")
		}
	})

	It("accepts every port from 1 to 65535 and no other", func() {
		for _, port := range []string{"0", "1", "80", "08080", "65535", "65536", "99999", "100000", "0000001"} {
			url := "https://example.com:" + port + "/hooks"
			expectSame("url "+url, create(url), wire.CheckURL(url), "spec.url", "")
		}
	})

	It("accepts exactly the headers package wire accepts, and refuses the others by the same rule without showing the value", func() {
		for _, tc := range wiretest.HeaderCases {
			var hs wire.HeaderSet
			Expect(hs.Add("X-Ok", "1")).To(Succeed())
			wireSays(fmt.Sprintf("%q: %q", tc.Name, tc.Value), hs.Add(tc.Name, tc.Value), tc.Want)
			hidden := ""
			if strings.TrimSpace(tc.Value) != "" {
				hidden = tc.Value
			}
			err := create("https://example.com/hooks", hookv1.Header{Name: "X-Ok", Value: "1"}, hookv1.Header{Name: tc.Name, Value: tc.Value})
			expectSame(fmt.Sprintf("header %q: %q", tc.Name, tc.Value), err, tc.Want, "spec.headers[1]", hidden)
		}
	})

	It("refuses every reserved header name in lower, upper and mixed case", func() {
		for _, name := range wire.ReservedHeaders {
			for _, c := range wiretest.Cases(name) {
				err := create("https://example.com/hooks", hookv1.Header{Name: "X-Ok", Value: "1"}, hookv1.Header{Name: c, Value: "v"})
				expectSame("header "+c, err, wire.ErrHeaderReserved, "spec.headers[1]", "")
			}
		}
	})

	It("refuses a header name repeated in another case", func() {
		for _, pair := range [][2]string{{"X-Tenant", "x-tenant"}, {"x-tenant", "X-TENANT"}, {"X-Tenant", "x-TeNaNt"}} {
			var hs wire.HeaderSet
			Expect(hs.Add(pair[0], "a")).To(Succeed())
			want := hs.Add(pair[1], "b")
			Expect(want).To(MatchError(wire.ErrHeaderRepeated))
			err := create("https://example.com/hooks", hookv1.Header{Name: pair[0], Value: "a"}, hookv1.Header{Name: pair[1], Value: "b"})
			expectSame(fmt.Sprintf("headers %q", pair), err, wire.ErrHeaderRepeated, "spec.headers", "")
		}
	})
})
