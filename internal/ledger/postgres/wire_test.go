package postgres_test

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
)

// roundTrips counts the round trips of a store's connections that run
// statements: a pipeline of the extended protocol (its Sync) with at least
// one Execute, or a simple-protocol Query other than the pool's liveness
// ping. A pipeline that only prepares statements (pgx's statement cache,
// once per connection and statement) does not count, so the count does
// not depend on which pooled connection served the call.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) count() int64 { return c.n.Load() }

func (c *roundTrips) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: &c.n}, nil
}

// countingConn parses the messages a client writes (the frontend protocol:
// an untyped startup message, then type byte and length).
type countingConn struct {
	net.Conn
	n        *atomic.Int64
	started  bool   // the startup message went out
	buf      []byte // an incomplete message
	executed bool   // an Execute since the last Sync
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for {
		if !c.started {
			if len(c.buf) < 4 {
				break
			}
			n := int(binary.BigEndian.Uint32(c.buf))
			if len(c.buf) < n {
				break
			}
			c.started, c.buf = true, c.buf[n:]
			continue
		}
		if len(c.buf) < 5 {
			break
		}
		n := 1 + int(binary.BigEndian.Uint32(c.buf[1:5]))
		if len(c.buf) < n {
			break
		}
		switch typ, body := c.buf[0], c.buf[5:n]; typ {
		case 'E':
			c.executed = true
		case 'S':
			if c.executed {
				c.n.Add(1)
			}
			c.executed = false
		case 'Q':
			if string(body) != "-- ping\x00" {
				c.n.Add(1)
			}
		}
		c.buf = c.buf[n:]
	}
	c.buf = append([]byte(nil), c.buf...) // do not pin a large write
	return c.Conn.Write(p)
}
