package main_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// stallingClients is how many connections each case of
// TestStalledClientsKeepMemoryBounded opens: several times the API's
// default connection cap, and enough that, unbounded, they would hold more
// than the container's memory limit.
const stallingClients = 8000

// containerMemoryLimit is the manager's memory limit in
// config/manager/manager.yaml.
const containerMemoryLimit = 512 << 20

// TestStalledClientsKeepMemoryBounded runs the engine and its API as a
// process (so that its resident memory is its own) with the Deployment's
// GOGC and GOMEMLIMIT, opens thousands of connections that each send a
// request and then stall, waits until the server has read everything they
// sent, and checks that the process's peak resident memory (VmHWM) stayed
// under the container's limit while a legitimate publisher is still
// answered 2xx. Each case is a kind of request that makes the server hold
// memory for a stalled client:
//   - a request line and headers just under net/http's header cap, with no
//     blank line to end them (the server buffers them until its header
//     timeout, which the test lengthens to model clients that reconnect as
//     soon as they are cut off);
//   - an unauthenticated publish declaring a large body and sending only
//     part of it (answered 401 at once; the connection must not then be
//     held while the server waits for the rest of the body).
func TestStalledClientsKeepMemoryBounded(t *testing.T) {
	raiseOpenFileLimit(t, 2*stallingClients+1024)
	for name, value := range deploymentEnv(t, "GOGC", "GOMEMLIMIT") {
		t.Setenv(name, value)
	}
	pad := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 1000))
		}
		return b.String()
	}
	cases := []struct {
		name string
		// answered: the server answers the request as it is, so it must
		// then close the connection rather than hold it.
		answered bool
		request  string
	}{
		{"near-maximum headers", false, "GET /v1/namespaces/crash/deliveries HTTP/1.1\r\nHost: api\r\n" + pad(60<<10)},
		{"unauthenticated body", true, "POST /v1/namespaces/crash/events HTTP/1.1\r\nHost: api\r\n" +
			"Content-Type: application/json\r\nContent-Length: 200000\r\n" + pad(28<<10) + "\r\n" +
			`{"type":"order.created","data":{"pad":"` + strings.Repeat("x", 1000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			rcv := newCountingReceiver(t, 0)
			h := startHost(t, "--ledger", "sqlite://"+filepath.Join(t.TempDir(), "ledger.db"),
				"--endpoints", writeEndpoints(t, rcv.URL(), 16), "--api-read-header-timeout", "5m")
			_, portText, _ := net.SplitHostPort(h.addr)
			port, _ := strconv.Atoi(portText)
			before := memoryStatus(t, h.cmd.Process.Pid)

			var sent, closedByServer atomic.Int64
			var wg sync.WaitGroup
			conns := make(chan net.Conn, stallingClients)
			t.Cleanup(func() {
				close(conns)
				for c := range conns {
					_ = c.Close()
				}
				wg.Wait()
			})
			for range stallingClients {
				c, err := net.Dial("tcp", h.addr)
				if err != nil {
					t.Fatalf("dialing connection %d: %v", sent.Load(), err)
				}
				conns <- c
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := io.WriteString(c, tc.request); err == nil {
						sent.Add(1)
					} else {
						closedByServer.Add(1) // refused before it was all sent
						return
					}
					// Whatever the server answers, the connection is held
					// until the server closes it (or the test ends).
					_, _ = io.Copy(io.Discard, c)
					closedByServer.Add(1)
				}()
			}
			// The server has taken in every request when no byte is left
			// queued on any of its sockets, and each connection is either
			// still open at the server or closed by it.
			g.Eventually(func() error {
				open, queued := loopbackSockets(t, port)
				if queued > 0 {
					return fmt.Errorf("%d bytes still queued", queued)
				}
				if done := sent.Load(); done+closedByServer.Load() < stallingClients {
					return fmt.Errorf("%d requests sent, %d connections closed by the server", done, closedByServer.Load())
				}
				if open+int(closedByServer.Load()) < stallingClients {
					return fmt.Errorf("%d connections open at the server, %d closed by it", open, closedByServer.Load())
				}
				return nil
			}).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
			held, _ := loopbackSockets(t, port)

			client := &http.Client{Timeout: 10 * time.Second}
			for i := range 20 {
				if _, err := publish(client, h.addr, fmt.Sprintf("%s-%d", strings.ReplaceAll(tc.name, " ", "-"), i)); err != nil {
					t.Fatalf("publish %d while %d stalled connections are held: %v", i, held, err)
				}
			}
			after := memoryStatus(t, h.cmd.Process.Pid)
			t.Logf("%d stalled clients: %d connections held by the server, %d closed by it; RSS %d MiB before, %d MiB after, peak %d MiB",
				stallingClients, held, closedByServer.Load(), before.rss>>20, after.rss>>20, after.peak>>20)
			if tc.answered && held > 0 {
				t.Errorf("the server still holds %d connections it has answered", held)
			}
			if after.peak >= containerMemoryLimit {
				t.Errorf("peak resident memory %d MiB reached the container's limit of %d MiB", after.peak>>20, containerMemoryLimit>>20)
			}
		})
	}
}

// raiseOpenFileLimit raises this process's RLIMIT_NOFILE (inherited by
// the enginehost it starts) to at least n, within the hard limit.
func raiseOpenFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Fatalf("the open-file hard limit %d is below the %d this test needs", lim.Max, n)
	}
	old := lim.Cur
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lim.Cur = old
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	})
}

// deploymentEnv returns the values of the named environment variables of
// the manager container in config/manager/manager.yaml, so that the test
// runs the process as the Deployment does.
func deploymentEnv(t *testing.T, names ...string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, name := range names {
		m := regexp.MustCompile(`(?m)^\s*- name: ` + name + `\s*\n\s*value: "?([^"\n]+)"?\s*$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("config/manager/manager.yaml sets no %s", name)
		}
		env[name] = string(m[1])
	}
	return env
}

type memory struct{ rss, peak int64 }

// memoryStatus reads the resident (VmRSS) and peak resident (VmHWM) memory
// of process pid.
func memoryStatus(t *testing.T, pid int) memory {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &kb); err == nil {
			m.rss = kb << 10
		}
		if _, err := fmt.Sscanf(sc.Text(), "VmHWM: %d kB", &kb); err == nil {
			m.peak = kb << 10
		}
	}
	if m.rss == 0 || m.peak == 0 {
		t.Fatalf("/proc/%d/status has no VmRSS or VmHWM", pid)
	}
	return m
}

// loopbackSockets reads /proc/net/tcp: how many established sockets the
// server on port holds, and how many bytes are queued (sent but not yet
// read, on either side) on the connections to it.
func loopbackSockets(t *testing.T, port int) (open int, queued int64) {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hexPort := fmt.Sprintf(":%04X", port)
	// The table can list a socket twice when it changes while being read.
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		local, remote := strings.HasSuffix(fields[1], hexPort), strings.HasSuffix(fields[2], hexPort)
		if (!local && !remote) || seen[fields[1]+fields[2]] {
			continue
		}
		seen[fields[1]+fields[2]] = true
		if local && fields[3] == "01" { // ESTABLISHED
			open++
		}
		tx, rx, _ := strings.Cut(fields[4], ":")
		for _, q := range []string{tx, rx} {
			n, _ := strconv.ParseInt(q, 16, 64)
			queued += n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return open, queued
}
