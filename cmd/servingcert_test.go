package main

import (
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestServingCertFlags(t *testing.T) {
	var o servingCertOptions
	o.bindFlags(flag.NewFlagSet("test", flag.ContinueOnError))
	p, err := o.policy("hookkeeper-system")
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	want := []string{
		"hookkeeper-api.hookkeeper-system.svc", "hookkeeper-api.hookkeeper-system.svc.cluster.local",
		"hookkeeper-delivery-api.hookkeeper-system.svc", "hookkeeper-delivery-api.hookkeeper-system.svc.cluster.local",
	}
	if !slices.Equal(p.DNSNames, want) {
		t.Errorf("DNS names = %v, want %v", p.DNSNames, want)
	}

	for name, tc := range map[string]struct {
		edit func(*servingCertOptions)
		want string
	}{
		"a name with a namespace":            {func(o *servingCertOptions) { o.services = "hookkeeper-api.other" }, "--serving-cert-services"},
		"no Service":                         {func(o *servingCertOptions) { o.services = " , " }, "DNS names"},
		"CA shorter than three certificates": {func(o *servingCertOptions) { o.caValidity = 2 * o.validity }, "CA validity"},
		"overlap too long":                   {func(o *servingCertOptions) { o.overlap = o.validity }, "overlap"},
	} {
		bad := o
		tc.edit(&bad)
		if _, err := bad.policy("ns"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}
