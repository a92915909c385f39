package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// relayEnv, when set, makes the bench binary the pass-through relay,
// forwarding to the URL it holds: the same binary re-executed, so that the
// relay is a process of its own like the engine.
const relayEnv = "HOOKKEEPER_BENCH_RELAY_TO"

func init() {
	if to := os.Getenv(relayEnv); to != "" {
		if err := serveRelay(to); err != nil {
			fmt.Fprintln(os.Stderr, "relay:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// serveRelay is the pass-through relay, the ceiling for anything that
// takes an event over HTTP and delivers it over HTTP: it checks the bearer
// token, reads the event, signs it the Standard Webhooks way with a fresh
// id, forwards it to the receiver and answers 201 once the receiver
// answered 2xx. No storage, no retries.
func serveRelay(to string) error {
	secret, err := signing.GenerateSecret()
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}, Timeout: 5 * time.Second}
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	h := func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		buf := bufs.Get().(*bytes.Buffer)
		defer bufs.Put(buf)
		buf.Reset()
		if _, err := buf.ReadFrom(io.LimitReader(req.Body, 1<<20)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		id := ledger.NewID("evt", now)
		sig, err := signing.Sign(secret, id, now, buf.Bytes())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out, _ := http.NewRequest(http.MethodPost, to, bytes.NewReader(buf.Bytes()))
		out.Header.Set("Content-Type", "application/json")
		out.Header.Set(signing.HeaderID, id)
		out.Header.Set(signing.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		out.Header.Set(signing.HeaderSignature, sig)
		resp, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			http.Error(w, resp.Status, http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"`+id+`"}`)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println("listening", ln.Addr().String())
	return (&http.Server{Handler: http.HandlerFunc(h), ReadHeaderTimeout: 5 * time.Second}).Serve(ln)
}

// relayProc is a running relay process.
type relayProc struct {
	cmd  *exec.Cmd
	addr string
}

func startRelay(to string) (*relayProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), relayEnv+"="+to, "GOGC=400", "GOMEMLIMIT=400MiB")
	addr, err := startListening(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return &relayProc{cmd: cmd, addr: addr}, nil
}

func (r *relayProc) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
}
