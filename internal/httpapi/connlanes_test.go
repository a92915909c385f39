package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// from dials addr from the loopback address ip (any when empty), a
// distinct source to the connection cap; the connection closes when the
// test ends, and fails at the safety deadline.
func from(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: safetyDeadline}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(safetyDeadline)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// stallFrom opens a connection from ip that sends part of a request's
// headers and stops, and waits until the server counts it.
func stallFrom(t *testing.T, g *gomega.WithT, ip, addr string, m *serverMetrics, wantOpen int) net.Conn {
	t.Helper()
	conn := from(t, ip, addr)
	if _, err := io.WriteString(conn, "POST /v1/namespaces/shop/events HTTP/1.1\r\nHost: api\r\nX-Stall: "); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() float64 { return testutil.ToFloat64(m.open) }).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(wantOpen))
	return conn
}

// publishOn sends one authenticated publish on conn and reads its answer.
func publishOn(t *testing.T, conn net.Conn) int {
	t.Helper()
	if _, err := fmt.Fprintf(conn, "POST /v1/namespaces/shop/events HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", goodToken, len(validBody), validBody); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("publishing: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func publishHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := New(Config{Publisher: newFakePublisher(), Reader: &fakeReader{}, Auth: StaticTokens{goodToken: {Username: "publisher"}}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestConnectionLanes, step by step: a source over its cap of unproven
// connections evicts its own oldest; at the global cap the source holding
// the most unproven connections loses its oldest; a connection that
// authenticated is never evicted, so that with only proven connections
// left a newcomer is refused.
func TestConnectionLanes(t *testing.T) {
	g := gomega.NewWithT(t)
	addr, m := limitedServer(t, publishHandler(t), ServerOptions{MaxConnections: 4, MaxUnprovenConnectionsPerSource: 2})
	closed := func(reason string) float64 { return testutil.ToFloat64(m.closed.WithLabelValues(reason)) }

	// A publisher proves its keep-alive connection.
	proven := from(t, "127.0.0.3", addr)
	if code := publishOn(t, proven); code != http.StatusCreated {
		t.Fatalf("publish: %d", code)
	}
	// One address: its third unproven connection evicts its first.
	a1 := stallFrom(t, g, "127.0.0.2", addr, m, 2)
	a2 := stallFrom(t, g, "127.0.0.2", addr, m, 3)
	a3 := stallFrom(t, g, "127.0.0.2", addr, m, 3)
	if got := readToClose(t, a1); got != "" || closed(closeSourceEvicted) != 1 {
		t.Fatalf("the source's oldest: answered %q, source evictions %v", got, closed(closeSourceEvicted))
	}
	// At the global cap (4), another address's newcomer evicts from the
	// address holding the most unproven connections (127.0.0.2: 2).
	b1 := stallFrom(t, g, "127.0.0.4", addr, m, 4)
	b2 := stallFrom(t, g, "127.0.0.4", addr, m, 4)
	if got := readToClose(t, a2); got != "" || closed(closeEvicted) != 1 {
		t.Fatalf("the largest holder's oldest: answered %q, evictions %v", got, closed(closeEvicted))
	}
	// Now 127.0.0.2 and 127.0.0.4 hold 1 and 2 unproven: 127.0.0.4 loses.
	c5 := stallFrom(t, g, "127.0.0.5", addr, m, 4)
	if got := readToClose(t, b1); got != "" || closed(closeEvicted) != 2 {
		t.Fatalf("the largest holder's oldest: answered %q, evictions %v", got, closed(closeEvicted))
	}
	// Replace the unproven connections with proven ones: with only proven
	// connections open, a newcomer is refused, and the proven ones are
	// still served.
	for _, c := range []net.Conn{a3, b2, c5} {
		_ = c.Close()
	}
	g.Eventually(func() float64 { return testutil.ToFloat64(m.open) }).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(1))
	var all []net.Conn
	for _, ip := range []string{"127.0.0.6", "127.0.0.7", "127.0.0.8"} {
		c := from(t, ip, addr)
		if code := publishOn(t, c); code != http.StatusCreated {
			t.Fatalf("publish: %d", code)
		}
		all = append(all, c)
	}
	g.Eventually(func() float64 { return testutil.ToFloat64(m.open) }).WithTimeout(safetyDeadline).Should(gomega.BeEquivalentTo(4))
	refused := from(t, "127.0.0.9", addr)
	_, _ = io.WriteString(refused, "GET /v1/x HTTP/1.1\r\nHost: api\r\n\r\n")
	if got := readToClose(t, refused); got != "" || closed(closeRefused) != 1 {
		t.Fatalf("a newcomer with only proven connections open: answered %q, refused %v", got, closed(closeRefused))
	}
	for _, c := range append(all, proven) {
		if code := publishOn(t, c); code != http.StatusCreated {
			t.Errorf("a proven connection after the flood: %d", code)
		}
	}
}

// TestStalledConnectionFloodSparesPublishers is the report's attack on
// loopback, scaled to a cap of 256: 7,500 stalled connections (16 KiB of
// headers, never finished) opened as fast as 16 dialers can, from one
// address (127.0.0.2) and then from 32 (127.0.1.0-31), while an
// authorised publisher on a keep-alive connection (127.0.0.3) and one
// opening a new connection per publish (127.0.0.4) each publish 124
// events. It prints what it measured and asserts what does not depend on
// the machine's speed: no authorised publish fails, the flood was shed
// (connections closed by the cap), and the cap held.
func TestStalledConnectionFloodSparesPublishers(t *testing.T) {
	const (
		maxConns    = 256
		perSource   = 32
		publishes   = 124
		dialers     = 16
		floodConns  = 7500
		stallHeader = 16 << 10
	)
	for _, sc := range []struct {
		name    string
		sources []string
	}{
		{"one address", []string{"127.0.0.2"}},
		{"32 addresses", func() (ips []string) {
			for i := range 32 {
				ips = append(ips, fmt.Sprintf("127.0.1.%d", i))
			}
			return ips
		}()},
	} {
		t.Run(sc.name, func(t *testing.T) {
			addr, m := limitedServer(t, publishHandler(t), ServerOptions{MaxConnections: maxConns, MaxUnprovenConnectionsPerSource: perSource})
			ctx, stop := context.WithCancel(t.Context())
			var (
				flood    sync.WaitGroup
				attempts atomic.Int64
				peak     atomic.Int64
				connsMu  sync.Mutex
				conns    []net.Conn
			)
			stall := "POST /v1/namespaces/shop/events HTTP/1.1\r\nHost: api\r\nX-Stall: " + strings.Repeat("s", stallHeader)
			for i := range dialers {
				ip := sc.sources[i%len(sc.sources)]
				flood.Go(func() {
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
					for ctx.Err() == nil && attempts.Add(1) <= floodConns {
						c, err := d.DialContext(ctx, "tcp", addr)
						if err != nil {
							continue
						}
						_, _ = io.WriteString(c, stall)
						connsMu.Lock()
						conns = append(conns, c)
						connsMu.Unlock()
						if open := int64(testutil.ToFloat64(m.open)); open > peak.Load() {
							peak.Store(open)
						}
					}
				})
			}
			t.Cleanup(func() {
				stop()
				flood.Wait()
				for _, c := range conns {
					_ = c.Close()
				}
			})

			keepAlive := publisherFrom("127.0.0.3", false)
			newConn := publisherFrom("127.0.0.4", true)
			var results [2][]sample
			var pubs sync.WaitGroup
			for i, c := range []*http.Client{keepAlive, newConn} {
				pubs.Go(func() {
					for range publishes {
						time.Sleep(10 * time.Millisecond) // pacing, not synchronization: idle keep-alive time
						start := time.Now()
						status := post(ctx, c, "http://"+addr+"/v1/namespaces/shop/events")
						results[i] = append(results[i], sample{status, time.Since(start)})
					}
				})
			}
			pubs.Wait()
			stop()
			flood.Wait()

			shed := 0.0
			for _, reason := range []string{closeEvicted, closeRefused, closeSourceEvicted, closeSourceRefused} {
				shed += testutil.ToFloat64(m.closed.WithLabelValues(reason))
			}
			t.Logf("flood: %d stalled connections attempted from %d addresses; closed by the cap: %v evicted, %v refused, %v source-evicted, %v source-refused; peak open %d (cap %d)",
				min(attempts.Load(), floodConns), len(sc.sources),
				testutil.ToFloat64(m.closed.WithLabelValues(closeEvicted)), testutil.ToFloat64(m.closed.WithLabelValues(closeRefused)),
				testutil.ToFloat64(m.closed.WithLabelValues(closeSourceEvicted)), testutil.ToFloat64(m.closed.WithLabelValues(closeSourceRefused)),
				peak.Load(), maxConns)
			for i, name := range []string{"keep-alive publisher", "new-connection publisher"} {
				s := summarize(results[i])
				t.Logf("%s: %s", name, s)
				if s.failed > 0 || s.n != publishes {
					t.Errorf("%s: %d of %d publishes failed, want none", name, s.failed, s.n)
				}
			}
			if shed == 0 {
				t.Error("the cap closed no stalled connection: the flood did not reach it")
			}
			if peak.Load() > maxConns {
				t.Errorf("open connections peaked at %d, over the cap %d", peak.Load(), maxConns)
			}
		})
	}
}

// publisherFrom is an authorised publisher's client, its connections from
// ip; newConnections opens one per publish.
func publisherFrom(ip string, newConnections bool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
		DisableKeepAlives:   newConnections,
		MaxIdleConnsPerHost: 1,
	}}
}

// post publishes validBody and returns the status, 0 for no answer (EOF,
// reset).
func post(ctx context.Context, c *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(validBody))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+goodToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

type sample struct {
	status  int
	latency time.Duration
}

type summary struct {
	n, failed     int
	p50, p99, max time.Duration
	statuses      map[int]int
}

func (s summary) String() string {
	return fmt.Sprintf("%d publishes, %d failed, p50 %s, p99 %s, max %s, answers %v",
		s.n, s.failed, s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond), s.max.Round(time.Millisecond), s.statuses)
}

func summarize(samples []sample) summary {
	s := summary{n: len(samples), statuses: map[int]int{}}
	if s.n == 0 {
		return s
	}
	lat := make([]time.Duration, 0, len(samples))
	for _, x := range samples {
		s.statuses[x.status]++
		if x.status != http.StatusCreated {
			s.failed++
		}
		lat = append(lat, x.latency)
	}
	slices.Sort(lat)
	s.p50, s.p99, s.max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	return s
}
