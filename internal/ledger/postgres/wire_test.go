package postgres_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
)

// roundTrips counts the round trips of a store's connections that run
// statements: a pipeline of the extended protocol (its Sync) with at least
// one Execute, or a simple-protocol Query other than the pool's liveness
// ping. A pipeline that only prepares statements (pgx's statement cache,
// once per connection and statement) does not count, so the count does
// not depend on which pooled connection served the call. It also counts
// the statements executed (Execute messages) and keeps the text of every
// statement prepared (Parse messages).
type roundTrips struct {
	n, executed atomic.Int64
	mu          sync.Mutex
	parsed      []string
}

func (c *roundTrips) count() int64 { return c.n.Load() }

// statements is how many statements the connections executed.
func (c *roundTrips) statements() int64 { return c.executed.Load() }

// prepared returns the texts of the statements prepared since the last
// call, and forgets them.
func (c *roundTrips) prepared() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.parsed
	c.parsed = nil
	return out
}

func (c *roundTrips) parse(body []byte) {
	// Parse: the statement's name and its text, each ending with a zero.
	_, rest, _ := bytes.Cut(body, []byte{0})
	sql, _, _ := bytes.Cut(rest, []byte{0})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parsed = append(c.parsed, string(sql))
}

func (c *roundTrips) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, rt: c}, nil
}

// countingConn parses the messages a client writes (the frontend protocol:
// an untyped startup message, then type byte and length).
type countingConn struct {
	net.Conn
	rt       *roundTrips
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
		case 'P':
			c.rt.parse(body)
		case 'E':
			c.executed = true
			c.rt.executed.Add(1)
		case 'S':
			if c.executed {
				c.rt.n.Add(1)
			}
			c.executed = false
		case 'Q':
			if string(body) != "-- ping\x00" {
				c.rt.n.Add(1)
			}
		}
		c.buf = c.buf[n:]
	}
	c.buf = append([]byte(nil), c.buf...) // do not pin a large write
	return c.Conn.Write(p)
}
