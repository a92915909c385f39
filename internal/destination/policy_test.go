package destination_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/destination"
)

func prefixes(t *testing.T, list string) []netip.Prefix {
	t.Helper()
	out, err := destination.ParseCIDRs(list)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPolicyCheck(t *testing.T) {
	def := destination.New(destination.Options{})
	cluster := destination.New(destination.Options{
		ClusterServices: prefixes(t, "10.96.0.0/12, fd00:10:96::/112"),
		ClusterPods:     prefixes(t, "10.244.0.0/16"),
	})
	// Loopback and one in-cluster receiver allowed; the rest of the
	// service range stays forbidden.
	allowing := destination.New(destination.Options{
		Allowed:         prefixes(t, "127.0.0.0/8,::1,10.96.0.42,64:ff9b::/96,fd00:ec2::254/128"),
		ClusterServices: prefixes(t, "10.96.0.0/12"),
	})
	// An allowed prefix written IPv4-mapped covers the IPv4 addresses.
	mappedAllow := destination.New(destination.Options{Allowed: prefixes(t, "::ffff:127.0.0.0/104")})
	// Allowing a public range that contains a metadata address allows it:
	// the allow-list overrides everything.
	publicAllow := destination.New(destination.Options{Allowed: prefixes(t, "168.63.0.0/16")})

	tests := []struct {
		name   string
		policy *destination.Policy
		addr   string
		want   destination.Class // "" = allowed
	}{
		{"public IPv4", def, "93.184.215.14", ""},
		{"public IPv6", def, "2606:2800:21f:cb07:6820:80da:af6b:8b2c", ""},
		{"loopback 127.0.0.1", def, "127.0.0.1", destination.Loopback},
		{"loopback anywhere in 127/8", def, "127.255.0.9", destination.Loopback},
		{"loopback ::1", def, "::1", destination.Loopback},
		{"unspecified 0.0.0.0", def, "0.0.0.0", destination.Unspecified},
		{"unspecified ::", def, "::", destination.Unspecified},
		{"this network 0.1.2.3", def, "0.1.2.3", destination.Reserved},
		{"metadata IPv4", def, "169.254.169.254", destination.CloudMetadata},
		{"metadata IPv6 (AWS)", def, "fd00:ec2::254", destination.CloudMetadata},
		{"ECS task metadata", def, "169.254.170.2", destination.CloudMetadata},
		{"Azure WireServer", def, "168.63.129.16", destination.CloudMetadata},
		{"Alibaba metadata", def, "100.100.100.200", destination.CloudMetadata},
		{"link-local IPv4", def, "169.254.1.1", destination.LinkLocal},
		{"link-local IPv6", def, "fe80::1", destination.LinkLocal},
		{"link-local IPv6 with a zone", def, "fe80::1%eth0", destination.LinkLocal},
		{"RFC 1918 10/8", def, "10.1.2.3", destination.Private},
		{"RFC 1918 172.16/12", def, "172.31.255.1", destination.Private},
		{"just outside 172.16/12", def, "172.32.0.1", ""},
		{"RFC 1918 192.168/16", def, "192.168.1.10", destination.Private},
		{"shared address space", def, "100.64.0.1", destination.Private},
		{"unique local IPv6", def, "fd12:3456::1", destination.Private},
		{"multicast IPv4", def, "224.0.0.251", destination.Multicast},
		{"multicast IPv6", def, "ff02::1", destination.Multicast},
		{"broadcast", def, "255.255.255.255", destination.Reserved},
		{"class E", def, "240.0.0.1", destination.Reserved},
		{"IPv4-compatible IPv6", def, "::a9fe:a9fe", destination.Reserved},
		{"Teredo", def, "2001:0:4136:e378:8000:63bf:3fff:fdd2", destination.Reserved},
		{"site-local IPv6", def, "fec0::1", destination.Reserved},

		{"IPv4-mapped loopback", def, "::ffff:127.0.0.1", destination.Loopback},
		{"IPv4-mapped metadata", def, "::ffff:169.254.169.254", destination.CloudMetadata},
		{"IPv4-mapped private", def, "::ffff:10.0.0.1", destination.Private},
		{"IPv4-mapped public", def, "::ffff:93.184.215.14", ""},
		{"NAT64 of metadata", def, "64:ff9b::a9fe:a9fe", destination.CloudMetadata},
		{"NAT64 of loopback", def, "64:ff9b::7f00:1", destination.Loopback},
		{"NAT64 of a public address", def, "64:ff9b::5db8:d70e", ""},
		{"6to4 of metadata", def, "2002:a9fe:a9fe::1", destination.CloudMetadata},
		{"6to4 of a public address", def, "2002:5db8:d70e::1", ""},

		{"cluster service range", cluster, "10.96.0.1", destination.ClusterService},
		{"cluster service range, IPv6", cluster, "fd00:10:96::a", destination.ClusterService},
		{"cluster pod range", cluster, "10.244.3.7", destination.ClusterPod},
		{"cluster pod range, IPv4-mapped", cluster, "::ffff:10.244.3.7", destination.ClusterPod},
		{"private outside the cluster ranges", cluster, "10.0.0.1", destination.Private},
		{"metadata before the cluster ranges", cluster, "169.254.169.254", destination.CloudMetadata},
		{"a cluster range in public space", destination.New(destination.Options{ClusterPods: prefixes(t, "203.0.113.0/24")}), "203.0.113.9", destination.ClusterPod},

		{"allowed loopback", allowing, "127.0.0.1", ""},
		{"allowed loopback, IPv4-mapped", allowing, "::ffff:127.0.0.1", ""},
		{"allowed ::1", allowing, "::1", ""},
		{"allowed in-cluster receiver", allowing, "10.96.0.42", ""},
		{"the rest of the service range", allowing, "10.96.0.43", destination.ClusterService},
		{"metadata stays forbidden", allowing, "169.254.169.254", destination.CloudMetadata},
		{"an allowed NAT64 range", allowing, "64:ff9b::a9fe:a9fe", ""},
		{"allowed IPv6 metadata", allowing, "fd00:ec2::254", ""},
		{"mapped allow-list entry", mappedAllow, "127.0.0.1", ""},
		{"allow-list overrides metadata", publicAllow, "168.63.129.16", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Check(netip.MustParseAddr(tt.addr))
			var fe *destination.ForbiddenError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check(%s) = %v, want allowed", tt.addr, err)
			case tt.want == "":
				return
			case !errors.As(err, &fe):
				t.Fatalf("Check(%s) = %v, want a ForbiddenError of class %s", tt.addr, err, tt.want)
			case fe.Class != tt.want:
				t.Fatalf("Check(%s): class %s, want %s (%v)", tt.addr, fe.Class, tt.want, err)
			}
			if !strings.Contains(err.Error(), tt.want.Describe()) || !strings.Contains(err.Error(), "--allowed-destination-cidrs") {
				t.Errorf("message %q does not name the class and the flag", err)
			}
		})
	}
}

func TestCheckInvalidAddress(t *testing.T) {
	if err := destination.New(destination.Options{}).Check(netip.Addr{}); err == nil {
		t.Fatal("the zero address is allowed")
	}
}

func TestForbiddenErrorMessage(t *testing.T) {
	p := destination.New(destination.Options{})
	err := p.Check(netip.MustParseAddr("::ffff:169.254.169.254"))
	want := "destination forbidden: 169.254.169.254, a cloud metadata address; hookkeeper does not deliver there unless --allowed-destination-cidrs allows it"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	err = p.Check(netip.MustParseAddr("64:ff9b::a9fe:a9fe"))
	if err == nil || !strings.Contains(err.Error(), "64:ff9b::a9fe:a9fe, a cloud metadata address (it reaches 169.254.169.254)") {
		t.Fatalf("NAT64: %v", err)
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := destination.ParseCIDRs(" 127.0.0.0/8, ::1 ,, 10.1.2.3/8,::ffff:192.168.0.0/112,192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "192.168.0.0/16", "192.0.2.7/32"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %s, want %s", i, got[i], want[i])
		}
	}
	if got, err := destination.ParseCIDRs(""); err != nil || len(got) != 0 {
		t.Errorf("empty list: %v, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "not-an-ip", "fe80::1%eth0", "10.0.0.0/8,nope"} {
		if _, err := destination.ParseCIDRs(bad); err == nil {
			t.Errorf("ParseCIDRs(%q) accepted it", bad)
		}
	}
}

// fakeResolver answers from a table; other names are not found.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		if network == "ip" || (network == "ip4") == a.Unmap().Is4() {
			out = append(out, a)
		}
	}
	return out, nil
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func TestCheckHost(t *testing.T) {
	p := destination.New(destination.Options{Resolver: fakeResolver{
		"metadata.test":   addrs("169.254.169.254"),
		"mapped.test":     addrs("::ffff:127.0.0.1"),
		"public.test":     addrs("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
		"half-good.test":  addrs("93.184.215.14", "10.0.0.5"),
		"empty.test":      nil,
		"localhost.test.": addrs("127.0.0.1"),
	}})
	ctx := context.Background()
	for host, want := range map[string]destination.Class{
		"metadata.test":   destination.CloudMetadata,
		"mapped.test":     destination.Loopback,
		"half-good.test":  destination.Private,
		"localhost.test.": destination.Loopback,
		"169.254.169.254": destination.CloudMetadata,
		"[::1]":           destination.Loopback,
		"fe80::1%eth0":    destination.LinkLocal,
	} {
		err := p.CheckHost(ctx, host)
		var fe *destination.ForbiddenError
		if !errors.As(err, &fe) || fe.Class != want {
			t.Errorf("CheckHost(%s) = %v, want %s", host, err, want)
			continue
		}
		if net.ParseIP(strings.Trim(host, "[]")) == nil && !strings.HasPrefix(host, "fe80") && fe.Host != host {
			t.Errorf("CheckHost(%s) names host %q", host, fe.Host)
		}
	}
	if err := p.CheckHost(ctx, "public.test"); err != nil {
		t.Errorf("public.test: %v", err)
	}
	for _, host := range []string{"unknown.test", "empty.test"} {
		err := p.CheckHost(ctx, host)
		var fe *destination.ForbiddenError
		var dnsErr *net.DNSError
		if errors.As(err, &fe) || !errors.As(err, &dnsErr) {
			t.Errorf("CheckHost(%s) = %v, want a lookup error that is not a refusal", host, err)
		}
	}
}
