package dispatch_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// nodeVerifierDir holds the receiver that verifies with the Standard
// Webhooks reference library (npm standardwebhooks, pinned by its lock file).
var nodeVerifierDir = filepath.Join("..", "..", "test", "receivers", "node-verifier")

// TestNodeVerifier sends real signed deliveries to a receiver that checks
// them with the reference JavaScript implementation: our signatures must be
// accepted by code we did not write, during a rotation too, and a wrong
// secret must be rejected.
func TestNodeVerifier(t *testing.T) {
	oldSecret, newSecret, wrongSecret := mustSecret(t), mustSecret(t), mustSecret(t)
	base := startNodeVerifier(t, map[string]sensitive.Bytes{"/old": oldSecret, "/new": newSecret})
	sender := dispatch.NewSender() // real clock: the library checks the timestamp against its own

	const id = "evt_01jx0000000000000000000001"
	tests := []struct {
		name    string
		path    string
		secrets []sensitive.Bytes
		id      string
		data    string
		secret  string // the event's one-time secrets
		want    int
	}{
		{name: "current secret", path: "/new", secrets: []sensitive.Bytes{newSecret}, id: id, data: `{"n":1}`, want: 204},
		{name: "retry of the same event", path: "/new", secrets: []sensitive.Bytes{newSecret}, id: id, data: `{"n":1}`, want: 204},
		{name: "rotation, receiver knows only the new secret", path: "/new", secrets: []sensitive.Bytes{oldSecret, newSecret}, id: "evt_rot_new", data: `{"n":2}`, want: 204},
		{name: "rotation, receiver knows only the old secret", path: "/old", secrets: []sensitive.Bytes{oldSecret, newSecret}, id: "evt_rot_old", data: `{"n":3}`, want: 204},
		{name: "one-time secrets merged into data", path: "/new", secrets: []sensitive.Bytes{newSecret}, id: "evt_secret", data: `{"user": "u1"}`, secret: `{"confirm": "tok-123"}`, want: 204},
		{name: "non-ASCII and escaped data", path: "/new", secrets: []sensitive.Bytes{newSecret}, id: "evt_unicode", data: `{"name":"Zoë ✓ 🙂","q":"\"<&>\"\n","u":"\u00e9"}`, want: 204},
		{name: "wrong secret", path: "/new", secrets: []sensitive.Bytes{wrongSecret}, id: "evt_wrong", data: `{}`, want: 401},
		{name: "old secret after the receiver dropped it", path: "/new", secrets: []sensitive.Bytes{oldSecret}, id: "evt_dropped", data: `{}`, want: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := signedRequest(t, base+tt.path, tt.secrets...)
			req.EventID, req.EventTime, req.Data = tt.id, time.Now(), json.RawMessage(tt.data)
			if tt.secret != "" {
				req.Secrets = sensitive.Bytes(tt.secret)
			}
			res := sender.Send(context.Background(), req)
			if res.Err != nil || res.StatusCode != tt.want {
				t.Fatalf("status %d (%s), err %v; want %d", res.StatusCode, res.Excerpt, res.Err, tt.want)
			}
			if tt.want == 401 {
				if !strings.Contains(string(res.Excerpt), "No matching signature") {
					t.Errorf("rejected for %q, want a signature mismatch", res.Excerpt)
				}
				if v := dispatch.Classify(res, []string{"NetworkError", "Timeout", "408", "429", "5xx"}); v != dispatch.NonRetryable {
					t.Errorf("Classify = %v, want NonRetryable", v)
				}
			}
		})
	}

	type event struct {
		ID   string          `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	var stats map[string]struct {
		Verified []event `json:"verified"`
		Rejected int     `json:"rejected"`
	}
	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range stats["/new"].Verified {
		ids = append(ids, e.ID)
		switch e.ID {
		case "evt_secret":
			if string(e.Data) != `{"user":"u1","confirm":"tok-123"}` {
				t.Errorf("data with secrets as verified: %s", e.Data)
			}
		case "evt_unicode":
			var d map[string]string
			if json.Unmarshal(e.Data, &d) != nil || d["name"] != "Zoë ✓ 🙂" || d["q"] != "\"<&>\"\n" || d["u"] != "é" {
				t.Errorf("unicode data as verified: %s", e.Data)
			}
		}
		if e.Type != "user.created" {
			t.Errorf("type %q", e.Type)
		}
	}
	if got, want := strings.Join(ids, ","), id+","+id+",evt_rot_new,evt_secret,evt_unicode"; got != want {
		t.Errorf("/new verified %s, want %s", got, want)
	}
	if n := stats["/new"].Rejected; n != 2 {
		t.Errorf("/new rejected %d, want 2", n)
	}
	if old := stats["/old"]; len(old.Verified) != 1 || old.Verified[0].ID != "evt_rot_old" || old.Rejected != 0 {
		t.Errorf("/old: %+v", old)
	}
}

// startNodeVerifier installs the receiver's locked dependencies if needed,
// starts it with one secret per path, waits for its port line and returns
// its base URL. It stops when the test ends.
func startNodeVerifier(t *testing.T, secrets map[string]sensitive.Bytes) string {
	t.Helper()
	node, npm := requireTool(t, "node"), requireTool(t, "npm")
	// npm writes node_modules/.package-lock.json last: its absence means
	// no install, or an interrupted one.
	if _, err := os.Stat(filepath.Join(nodeVerifierDir, "node_modules", ".package-lock.json")); errors.Is(err, fs.ErrNotExist) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = nodeVerifierDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", nodeVerifierDir, err, out)
		}
	}

	plain := make(map[string]string, len(secrets))
	for path, s := range secrets {
		plain[path] = string(s.Reveal())
	}
	env, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "server.js")
	cmd.Dir = nodeVerifierDir
	cmd.Env = append(os.Environ(), "RECEIVER_SECRETS="+string(env))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the node verifier: %v", err)
	}

	// The first stdout line is the readiness signal; the rest is drained
	// until the process exits.
	first := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
		}
	}()
	stop := func() {
		_ = stdin.Close() // the receiver exits when stdin closes
		select {
		case <-drained:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-drained
		}
		_ = cmd.Wait()
	}
	t.Cleanup(stop)

	var line string
	select {
	case l, ok := <-first:
		if !ok {
			stop()
			t.Fatalf("the node verifier exited before listening:\n%s", stderr.String())
		}
		line = l
	case <-time.After(30 * time.Second):
		t.Fatalf("the node verifier printed no port within 30s:\n%s", stderr.String())
	}
	port, ok := strings.CutPrefix(line, "port=")
	if !ok || port == "" {
		t.Fatalf("the node verifier printed %q, want port=<n>", line)
	}
	return "http://127.0.0.1:" + port
}

// requireTool returns the path of a tool this test cannot do without. It
// fails, never skips: a missing verifier must not pass unnoticed.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI: %s not found; CI must provide Node.js 20 and npm to verify signatures with the reference library: %v", name, err)
	}
	t.Fatalf("%s not found: this test verifies signatures with the npm package standardwebhooks; install Node.js 20 and npm (Debian: apt-get install nodejs npm): %v", name, err)
	return ""
}

// lockedBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
