package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/test/receivers"
)

// These tests run the engine as a real process (enginehost), so that it can
// be killed with SIGKILL mid-run and so that two of them can share one
// PostgreSQL ledger.

const token = "test-token"

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func enginehostBinary(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "enginehost")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "enginehost")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// host is one running enginehost process.
type host struct {
	cmd    *exec.Cmd
	addr   string
	stdout *bufio.Scanner
	stderr *bytes.Buffer
	done   chan struct{} // closed once the process has been reaped
}

func startHost(t *testing.T, args ...string) *host {
	t.Helper()
	cmd := exec.Command(enginehostBinary(t), append([]string{"--token", token}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &host{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.stdout = bufio.NewScanner(stdout)
	if !h.stdout.Scan() || !strings.HasPrefix(h.stdout.Text(), "listening ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("enginehost did not start: %q\n%s", h.stdout.Text(), h.stderr)
	}
	h.addr = strings.TrimPrefix(h.stdout.Text(), "listening ")
	go func() { _ = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-h.done })
	return h
}

// stop ends the process gracefully and returns how many attempts it made.
func (h *host) stop(t *testing.T) int {
	t.Helper()
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	attempts := -1
	for h.stdout.Scan() {
		if _, err := fmt.Sscanf(h.stdout.Text(), "attempts %d", &attempts); err == nil {
			break
		}
	}
	<-h.done
	return attempts
}

// kill ends the process with SIGKILL: no shutdown code runs.
func (h *host) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-h.done
}

// countingReceiver counts the requests of every webhook-id it receives
// (test/receivers) and the times one event was being received twice at
// the same moment (Overlaps); each answer is held for hold.
type countingReceiver struct {
	*receivers.Receiver
	// gate, when set, holds every request past the first gateAfter
	// events until it is closed: accepted events then stay pending
	// whatever the machine's speed.
	gate      chan struct{}
	gateAfter int
}

func newCountingReceiver(t *testing.T, hold time.Duration) *countingReceiver {
	r := &countingReceiver{}
	r.Receiver = receivers.New(receivers.Options{Delay: hold, Respond: func(*http.Request, *receivers.Request) int {
		if r.gate != nil && r.Events() > r.gateAfter {
			<-r.gate
		}
		return http.StatusNoContent
	}})
	t.Cleanup(r.Close)
	return r
}

func writeEndpoints(t *testing.T, url string, maxInFlight int) string {
	t.Helper()
	return writeEndpointsTimeout(t, url, maxInFlight, "2s")
}

// writeEndpointsTimeout writes the endpoints file with the given attempt
// timeout.
func writeEndpointsTimeout(t *testing.T, url string, maxInFlight int, timeout string) string {
	t.Helper()
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	cfg := []map[string]any{{
		"namespace": "crash", "name": "receiver", "url": url, "eventTypes": []string{"*"},
		"secret": string(secret.Reveal()), "maxInFlight": maxInFlight, "maxAttempts": 20,
		"delay": "50ms", "timeout": timeout,
	}}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// publish posts one event; it returns the event ID when the engine
// answered 201 or 200 (committed), or "" when the outcome is unknown.
func publish(client *http.Client, addr, key string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/namespaces/crash/events",
		strings.NewReader(`{"type":"order.created","data":{"key":"`+key+`","pad":"`+strings.Repeat("x", 900)+`"}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.ID, nil
}

// TestCrashLosesNoAcceptedEvent publishes thousands of events, kills the
// engine with SIGKILL while thousands are still in flight, restarts it on
// the same ledger file and checks that every event whose publish was
// answered is delivered at least once, and that publishing the unanswered
// ones again with the same Idempotency-Key creates no duplicates.
func TestCrashLosesNoAcceptedEvent(t *testing.T) {
	const total = 5000
	g := gomega.NewWithT(t)
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	// A slow receiver (16 at a time, 20ms each) keeps thousands of accepted
	// events pending when the engine is killed.
	rcv := newCountingReceiver(t, 20*time.Millisecond)
	// Past the first 100 events the receiver holds every request until
	// the kill: thousands stay pending however fast the machine delivers.
	rcv.gate, rcv.gateAfter = make(chan struct{}), 100
	endpoints := writeEndpoints(t, rcv.URL(), 16)
	args := []string{"--ledger", "sqlite://" + ledgerPath, "--endpoints", endpoints, "--lease-margin", "1s", "--workers", "32"}

	first := startHost(t, args...)
	var (
		mu       sync.Mutex
		accepted = map[string]string{} // key -> event ID
		killed   = make(chan struct{})
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				key := fmt.Sprintf("key-%05d", i)
				id, err := publish(client, first.addr, key)
				if err != nil {
					select {
					case <-killed:
						return // the engine is gone; unanswered keys are republished later
					default:
						t.Errorf("publish %s before the kill: %v", key, err)
						return
					}
				}
				mu.Lock()
				accepted[key] = id
				mu.Unlock()
			}
		}()
	}

	// Kill once a good share is accepted but much is still undelivered.
	g.Eventually(func() bool {
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		return n >= 1500 && rcv.Events() >= 100
	}).WithTimeout(2 * time.Minute).WithPolling(time.Millisecond).Should(gomega.BeTrue())
	close(killed)
	first.kill(t)
	wg.Wait()
	close(rcv.gate)

	mu.Lock()
	acceptedAtKill := len(accepted)
	mu.Unlock()
	deliveredAtKill := rcv.Events()
	t.Logf("at SIGKILL: %d events accepted, %d delivered", acceptedAtKill, deliveredAtKill)
	if acceptedAtKill-deliveredAtKill < 1000 {
		t.Fatalf("only %d accepted events were in flight at the kill; the test must kill with thousands pending", acceptedAtKill-deliveredAtKill)
	}

	second := startHost(t, args...)
	// Every accepted event is delivered.
	g.Eventually(func() []string {
		var missing []string
		mu.Lock()
		defer mu.Unlock()
		for key, id := range accepted {
			if rcv.Count(id) == 0 {
				missing = append(missing, key)
			}
		}
		return missing
	}).WithTimeout(120*time.Second).WithPolling(50*time.Millisecond).Should(gomega.BeEmpty(), "accepted events not delivered after the restart")

	// Republish every key: the accepted ones are idempotent replays with
	// their original IDs, the others are new, and all of them get delivered.
	for i := 1; i <= total; i++ {
		key := fmt.Sprintf("key-%05d", i)
		id, err := publish(client, second.addr, key)
		if err != nil {
			t.Fatalf("republish %s: %v", key, err)
		}
		if orig, ok := accepted[key]; ok && orig != id {
			t.Fatalf("republishing accepted key %s gave a new event %s (was %s)", key, id, orig)
		}
		accepted[key] = id
	}
	g.Eventually(func() int { return rcv.Events() }).WithTimeout(120*time.Second).WithPolling(50*time.Millisecond).
		Should(gomega.BeEquivalentTo(total), "distinct events delivered")
	// The attempts cut short by the kill reached the receiver but were
	// never recorded: their leases expire and they are sent again. Wait
	// until the ledger has nothing pending before stopping.
	g.Eventually(func() (int, error) { return pendingDeliveries(client, second.addr) }).
		WithTimeout(120*time.Second).WithPolling(100*time.Millisecond).Should(gomega.BeZero(), "deliveries still pending")
	second.stop(t)

	// The ledger agrees: exactly total events, all delivered.
	store, err := sqlite.Open(context.Background(), ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stats, err := store.EndpointStats(context.Background(), "crash/receiver")
	if err != nil {
		t.Fatal(err)
	}
	if stats.Delivered != total || stats.Pending != 0 || stats.InFlight != 0 {
		t.Fatalf("ledger stats after recovery: %+v, want %d delivered and nothing pending", stats, total)
	}
	t.Logf("receiver saw %d requests for %d events (%d redelivered after the crash)", rcv.Total(), total, rcv.Total()-total)
}

// TestTwoProcessesShareOnePostgres runs two engine processes on one
// PostgreSQL ledger: both do work, every event is delivered, and no
// delivery is ever being sent by both at the same time.
func TestTwoProcessesShareOnePostgres(t *testing.T) {
	const total = 2000
	g := gomega.NewWithT(t)
	dsn := pgtest.DSN(t)
	schema := pgtest.NewSchema(t)
	rcv := newCountingReceiver(t, 5*time.Millisecond)
	endpoints := writeEndpoints(t, rcv.URL(), 64)
	args := []string{"--ledger", dsn, "--pg-schema", schema, "--endpoints", endpoints, "--workers", "32", "--idle-wait", "50ms"}
	a := startHost(t, args...)
	b := startHost(t, args...)

	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := a.addr
			if w%2 == 1 {
				addr = b.addr
			}
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				if _, err := publish(client, addr, fmt.Sprintf("k%d", i)); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	g.Eventually(func() int { return rcv.Events() }).WithTimeout(120 * time.Second).WithPolling(20 * time.Millisecond).
		Should(gomega.BeEquivalentTo(total))

	attemptsA, attemptsB := a.stop(t), b.stop(t)
	t.Logf("process A made %d attempts, process B %d; receiver saw %d requests", attemptsA, attemptsB, rcv.Total())
	if rcv.Overlaps() != 0 {
		t.Fatalf("%d times a delivery was being sent by two engines at once", rcv.Overlaps())
	}
	if rcv.Total() != total {
		t.Fatalf("receiver saw %d requests for %d events: some delivery was sent twice", rcv.Total(), total)
	}
	if attemptsA < total/10 || attemptsB < total/10 {
		t.Fatalf("work was not shared: A=%d B=%d", attemptsA, attemptsB)
	}
	if attemptsA+attemptsB != total {
		t.Fatalf("attempts A+B = %d, want %d", attemptsA+attemptsB, total)
	}
}

// TestTwoProcessesShareOneRetryBudget runs two engine processes on one
// PostgreSQL ledger against an endpoint that always fails, with a retry
// budget of 5 retries a minute (ratio 0): together they must retry exactly
// 5 times in the minute, however the claims fall between them.
func TestTwoProcessesShareOneRetryBudget(t *testing.T) {
	const events, allowance = 20, 5
	g := gomega.NewWithT(t)
	dsn := pgtest.DSN(t)
	schema := pgtest.NewSchema(t)
	enginehostBinary(t) // built before the clock starts, however long that takes

	// Both engines run on one clock shifted so that it reads second 0 of
	// a minute now: the budget's minute then lasts a full minute of the
	// test, whatever the wall clock reads and however slow the machine
	// was to get here.
	started := time.Now()
	offset := started.Truncate(time.Minute).Add(time.Minute).Sub(started)
	minuteEnd := started.Add(57 * time.Second)

	counting := receivers.New(receivers.Options{Respond: func(*http.Request, *receivers.Request) int { return http.StatusServiceUnavailable }})
	t.Cleanup(counting.Close)

	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal([]map[string]any{{
		"namespace": "crash", "name": "receiver", "url": counting.URL(), "eventTypes": []string{"*"},
		"secret": string(secret.Reveal()), "maxInFlight": 64, "maxAttempts": 100, "delay": "50ms", "timeout": "2s",
		"budget": map[string]int{"ratioPercent": 0, "minPerMinute": allowance},
	}})
	endpoints := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(endpoints, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--ledger", dsn, "--pg-schema", schema, "--endpoints", endpoints, "--idle-wait", "20ms", "--clock-offset", offset.String()}
	a := startHost(t, args...)
	b := startHost(t, args...)
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range events {
		addr := a.addr
		if i%2 == 1 {
			addr = b.addr
		}
		if _, err := publish(client, addr, fmt.Sprintf("budget-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	retries := func() int { return counting.Total() - counting.Events() }
	g.Eventually(counting.Events).WithTimeout(20 * time.Second).Should(gomega.BeEquivalentTo(events))
	g.Eventually(retries).WithTimeout(time.Until(minuteEnd)).Should(gomega.BeEquivalentTo(allowance))
	g.Consistently(retries).WithTimeout(min(time.Until(minuteEnd), 8*time.Second)).WithPolling(50*time.Millisecond).
		Should(gomega.BeEquivalentTo(allowance), "the two engines overspent the budget")
	t.Logf("%d first attempts, %d retries in the minute, shared by two processes", counting.Events(), retries())
}

// pendingDeliveries counts the receiver endpoint's deliveries that are
// scheduled or in flight, through the read API.
func pendingDeliveries(client *http.Client, addr string) (int, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+
		"/v1/namespaces/crash/deliveries?endpoint=receiver&state=scheduled,in_flight&limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return -1, fmt.Errorf("listing deliveries: HTTP %d: %s", resp.StatusCode, b)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return -1, err
	}
	return len(list.Items), nil
}

// TestRestartResendsACrashedAttemptAtOnce kills the engine with SIGKILL
// while an attempt is in progress and restarts it: the restarted process
// reclaims its predecessor's lease and sends the delivery again at once.
// The attempt timeout is 10 minutes, so waiting for the lease to expire
// (10m15s) would fail the minute the test allows.
func TestRestartResendsACrashedAttemptAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		// The SQLite ledger: the file lock proves the previous process is
		// gone, whatever its identity.
		{"SQLite", func(t *testing.T) []string {
			return []string{"--ledger", "sqlite://" + filepath.Join(t.TempDir(), "ledger.db")}
		}},
		// The PostgreSQL ledger: the same --instance (a pod's UID, across
		// a container restart) reclaims its earlier process's leases.
		{"PostgreSQL", func(t *testing.T) []string {
			return []string{"--ledger", pgtest.DSN(t), "--pg-schema", pgtest.NewSchema(t), "--instance", "pod-uid-1"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			// The receiver holds the first request until its connection
			// dies with the engine; it answers every later one.
			first := make(chan string, 1)
			rcv := receivers.New(receivers.Options{Respond: func(req *http.Request, rc *receivers.Request) int {
				if rc.N == 1 {
					first <- rc.WebhookID
					<-req.Context().Done() // no answer reaches the dead engine
				}
				return http.StatusNoContent
			}})
			t.Cleanup(rcv.Close)
			args := append(tc.args(t), "--endpoints", writeEndpointsTimeout(t, rcv.URL(), 1, "10m"), "--idle-wait", "50ms")

			crashed := startHost(t, args...)
			client := &http.Client{Timeout: 10 * time.Second}
			id, err := publish(client, crashed.addr, "crash-me")
			if err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-first:
				if got != id {
					t.Fatalf("receiver got %s, want %s", got, id)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the first attempt never reached the receiver")
			}
			crashed.kill(t)

			restarted := startHost(t, args...)
			g.Eventually(func() int { return rcv.Count(id) }).WithTimeout(time.Minute).WithPolling(50*time.Millisecond).Should(gomega.Equal(2),
				"the restarted engine did not resend the crashed attempt before its lease would expire")
			g.Eventually(func() (int, error) { return pendingDeliveries(client, restarted.addr) }).
				WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(gomega.BeZero())
			restarted.stop(t)
		})
	}
}
