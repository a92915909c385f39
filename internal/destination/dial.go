package destination

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// minPerAddress is the least time an address gets when a name resolves to
// several and the deadline is shared among them (as the standard dialer
// does).
const minPerAddress = 2 * time.Second

// DialContext connects to address ("host:port") on network ("tcp", "tcp4"
// or "tcp6"), for http.Transport.DialContext. It resolves host itself and
// refuses with a *ForbiddenError, before any connection is attempted, when
// host is or resolves to a forbidden address; otherwise it tries the
// resolved addresses in order, sharing the context's deadline among them,
// and the socket's Control hook checks each once more as it connects.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ipNetwork := "ip"
	switch network {
	case "tcp":
	case "tcp4":
		ipNetwork = "ip4"
	case "tcp6":
		ipNetwork = "ip6"
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("invalid port %q", portText)}
	}
	addrs, err := p.Resolve(ctx, ipNetwork, host)
	if err != nil {
		return nil, err
	}
	var first error
	for i, a := range addrs {
		dctx, cancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok && i < len(addrs)-1 {
			left := time.Until(deadline)
			per := max(left/time.Duration(len(addrs)-i), min(minPerAddress, left))
			dctx, cancel = context.WithTimeout(ctx, per)
		}
		conn, err := p.dialer.DialContext(dctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		cancel()
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// control is the dialer's last word: it sees the address the socket is
// about to connect to.
func (p *Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("destination: cannot check the address %q", address)
	}
	return p.check("", ap.Addr())
}
