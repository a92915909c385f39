package destination

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Class says why an address is forbidden.
type Class string

// The classes of forbidden addresses, in the order a Policy tries them: the
// most specific first, so that 169.254.169.254 is named a cloud metadata
// address rather than a link-local one.
const (
	// CloudMetadata: the instance metadata services of the clouds
	// (169.254.169.254 and fd00:ec2::254 for most of them, AWS's container
	// and pod identity agents, Azure's WireServer, Alibaba's and Oracle's).
	CloudMetadata Class = "CloudMetadata"
	// ClusterService: the cluster's service range (--cluster-service-cidrs).
	ClusterService Class = "ClusterService"
	// ClusterPod: the cluster's pod range (--cluster-pod-cidrs).
	ClusterPod Class = "ClusterPod"
	// Unspecified: 0.0.0.0 and ::, which Linux connects to the local host.
	Unspecified Class = "Unspecified"
	// Loopback: 127.0.0.0/8 and ::1.
	Loopback Class = "Loopback"
	// LinkLocal: 169.254.0.0/16 and fe80::/10.
	LinkLocal Class = "LinkLocal"
	// Private: RFC 1918 (10/8, 172.16/12, 192.168/16), the shared address
	// space 100.64.0.0/10 and unique local IPv6 fc00::/7, where nodes, pods,
	// services and the rest of a private network usually live.
	Private Class = "Private"
	// Multicast: 224.0.0.0/4 and ff00::/8.
	Multicast Class = "Multicast"
	// Reserved: ranges no webhook receiver has any business in ("this
	// network" 0.0.0.0/8, 240.0.0.0/4 and the broadcast address, IETF
	// protocol assignments, benchmarking, IPv4-compatible IPv6, Teredo,
	// local-use NAT64, site-local and discard-only IPv6).
	Reserved Class = "Reserved"
)

// Describe names the class in a sentence: "a cloud metadata address".
func (c Class) Describe() string {
	switch c {
	case CloudMetadata:
		return "a cloud metadata address"
	case ClusterService:
		return "an address in the cluster's service range"
	case ClusterPod:
		return "an address in the cluster's pod range"
	case Unspecified:
		return "the unspecified address"
	case Loopback:
		return "a loopback address"
	case LinkLocal:
		return "a link-local address"
	case Private:
		return "a private address"
	case Multicast:
		return "a multicast address"
	case Reserved:
		return "a reserved address"
	}
	return "a forbidden address"
}

// AllowHint ends every refusal: what an operator can do about it.
const AllowHint = "hookkeeper does not deliver there unless --allowed-destination-cidrs allows it"

// ForbiddenError is a refused destination. Its message names the address,
// the host name it was resolved from and the class; nothing else of the URL.
type ForbiddenError struct {
	// Host is the name that resolved to Addr; empty for an IP literal.
	Host string
	// Addr is the forbidden address (unmapped, without a zone).
	Addr netip.Addr
	// Via is the IPv4 address Addr reaches when Addr is a NAT64 or 6to4
	// address that embeds it; invalid otherwise.
	Via   netip.Addr
	Class Class
}

// Subject says what the address is: "169.254.169.254, a cloud metadata
// address" (with the IPv4 address a NAT64 or 6to4 address reaches).
func (e *ForbiddenError) Subject() string {
	s := e.Addr.String() + ", " + e.Class.Describe()
	if e.Via.IsValid() {
		s += " (it reaches " + e.Via.String() + ")"
	}
	return s
}

func (e *ForbiddenError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("destination forbidden: %s resolves to %s; %s", e.Host, e.Subject(), AllowHint)
	}
	return fmt.Sprintf("destination forbidden: %s; %s", e.Subject(), AllowHint)
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Policy.
type Options struct {
	// Allowed networks override every forbidden one.
	Allowed []netip.Prefix
	// ClusterServices and ClusterPods are the cluster's own ranges,
	// forbidden in addition to the built-in ones.
	ClusterServices []netip.Prefix
	ClusterPods     []netip.Prefix
	// Resolver resolves host names (net.DefaultResolver when nil); tests
	// inject one.
	Resolver Resolver
}

// Policy says which addresses may be dialled. Create it with New; it is
// safe for concurrent use.
type Policy struct {
	allowed  []netip.Prefix
	rules    []rule
	resolver Resolver
	dialer   net.Dialer
}

type rule struct {
	prefix netip.Prefix
	class  Class
}

// New returns the Policy of o: the built-in forbidden ranges and o's
// cluster ranges, unless an address is in one of o's allowed networks.
func New(o Options) *Policy {
	p := &Policy{allowed: normalizePrefixes(o.Allowed), resolver: o.Resolver}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	p.rules = append(p.rules, metadataRules...)
	for _, pr := range normalizePrefixes(o.ClusterServices) {
		p.rules = append(p.rules, rule{pr, ClusterService})
	}
	for _, pr := range normalizePrefixes(o.ClusterPods) {
		p.rules = append(p.rules, rule{pr, ClusterPod})
	}
	p.rules = append(p.rules, builtinRules...)
	p.dialer = net.Dialer{KeepAlive: 30 * time.Second, Control: p.control}
	return p
}

func mustRules(class Class, cidrs ...string) []rule {
	out := make([]rule, len(cidrs))
	for i, c := range cidrs {
		out[i] = rule{netip.MustParsePrefix(c), class}
	}
	return out
}

// metadataRules come first: they are inside link-local, private and
// unique local ranges, and deserve their own name.
var metadataRules = mustRules(CloudMetadata,
	"169.254.169.254/32", // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, ...
	"169.254.170.2/32",   // AWS ECS task metadata and credentials
	"169.254.170.23/32",  // AWS EKS Pod Identity agent
	"fd00:ec2::254/128",  // AWS IMDS over IPv6
	"fd00:ec2::23/128",   // AWS EKS Pod Identity agent over IPv6
	"168.63.129.16/32",   // Azure WireServer
	"100.100.100.200/32", // Alibaba Cloud
	"192.0.0.192/32",     // Oracle Cloud (classic)
)

var builtinRules = concat(
	mustRules(Unspecified, "0.0.0.0/32", "::/128"),
	mustRules(Loopback, "127.0.0.0/8", "::1/128"),
	mustRules(LinkLocal, "169.254.0.0/16", "fe80::/10"),
	mustRules(Private, "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"),
	mustRules(Multicast, "224.0.0.0/4", "ff00::/8"),
	mustRules(Reserved,
		"0.0.0.0/8", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4",
		"::/96", "100::/64", "2001::/32", "64:ff9b:1::/48", "fec0::/10"),
)

func concat(lists ...[]rule) []rule {
	var out []rule
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// The IPv6 ranges that embed an IPv4 address the packets end up at.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Check returns nil when addr may be dialled, else a *ForbiddenError.
func (p *Policy) Check(addr netip.Addr) error { return p.check("", addr) }

func (p *Policy) check(host string, addr netip.Addr) error {
	a := normalize(addr)
	class, via, forbidden := p.classify(a)
	if !forbidden {
		return nil
	}
	return &ForbiddenError{Host: host, Addr: a, Via: via, Class: class}
}

// classify returns the class of a forbidden normalized address (and the
// IPv4 address it reaches, for NAT64 and 6to4), or forbidden == false.
func (p *Policy) classify(a netip.Addr) (class Class, via netip.Addr, forbidden bool) {
	if !a.IsValid() {
		return Unspecified, netip.Addr{}, true
	}
	for _, pr := range p.allowed {
		if pr.Contains(a) {
			return "", netip.Addr{}, false
		}
	}
	if v4, ok := embeddedIPv4(a); ok {
		if class, _, forbidden := p.classify(v4); forbidden {
			return class, v4, true
		}
		return "", netip.Addr{}, false
	}
	for _, r := range p.rules {
		if r.prefix.Contains(a) {
			return r.class, netip.Addr{}, true
		}
	}
	return "", netip.Addr{}, false
}

// normalize drops the zone (netip.Prefix.Contains is false for an address
// with one) and unmaps IPv4-mapped IPv6 addresses.
func normalize(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// Resolve returns the addresses host resolves to on network ("ip", "ip4"
// or "ip6"), or host itself when it is an IP literal, unmapped (a zone is
// kept for dialling), after checking every one of them: when any is forbidden the answer is a *ForbiddenError naming
// it, so that a name with one good and one forbidden address is refused
// rather than half trusted. A failed lookup is returned as the resolver
// gave it.
func (p *Policy) Resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.check("", a); err != nil {
			return nil, err
		}
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := p.resolver.LookupNetIP(ctx, network, host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if err := p.check(host, a); err != nil {
			return nil, err
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// CheckHost reports whether host (a name or an IP literal, as in a URL)
// may be delivered to: a *ForbiddenError when it is or resolves to a
// forbidden address, a lookup error when the name did not resolve, nil
// otherwise.
func (p *Policy) CheckHost(ctx context.Context, host string) error {
	_, err := p.Resolve(ctx, "ip", host)
	return err
}

// ParseCIDRs parses a comma-separated list of CIDRs (a bare address stands
// for itself), as the manager's flags take them. Blank entries are ignored.
func ParseCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		var pr netip.Prefix
		var err error
		if strings.Contains(entry, "/") {
			pr, err = netip.ParsePrefix(entry)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(entry); err == nil && a.Zone() == "" {
				pr = netip.PrefixFrom(a, a.BitLen())
			} else if err == nil {
				err = errors.New("zones are not allowed")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or fd00::/8", entry)
		}
		out = append(out, normalizePrefix(pr))
	}
	return out, nil
}

func normalizePrefixes(in []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in))
	for _, pr := range in {
		if pr.IsValid() {
			out = append(out, normalizePrefix(pr))
		}
	}
	return out
}

// normalizePrefix masks pr and turns an IPv4-mapped prefix
// (::ffff:10.0.0.0/104) into the IPv4 one (10.0.0.0/8), since addresses are
// unmapped before they are matched.
func normalizePrefix(pr netip.Prefix) netip.Prefix {
	if a := pr.Addr(); a.Is4In6() && pr.Bits() >= 96 {
		pr = netip.PrefixFrom(a.Unmap(), pr.Bits()-96)
	}
	return pr.Masked()
}
