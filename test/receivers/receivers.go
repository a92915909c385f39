// Package receivers holds the tests' webhook receivers: Receiver here, a
// real HTTP receiver on loopback built on the public pkg/receiver, and
// node-verifier/, which verifies with the Standard Webhooks reference
// library.
//
// A Receiver records every request it gets (the suites count them by
// webhook-id, the event's identity, to see what was sent more than once)
// and answers what the test decides. Once it knows the endpoint's signing
// secrets (UseSecrets), each request also goes through pkg/receiver, as a
// receiver of hookkeeper's users does: its signature is verified, and an
// event already processed (answered 2xx) is recognised as a duplicate and
// answered 200 without asking the test again.
package receivers

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the de-duplication records' database

	"github.com/hookkeeper/hookkeeper/pkg/receiver"
)

// Request is one request a Receiver got.
type Request struct {
	At         time.Time // when it arrived
	Path       string
	WebhookID  string // the event's identity, stable across retries
	DeliveryID string // Hookkeeper-Delivery-Id
	Type       string
	Data       map[string]any
	// N counts the requests with this webhook-id so far, this one
	// included, from 1.
	N int
	// Verified: its signature verified with the secrets of UseSecrets.
	Verified bool
	// Duplicate: pkg/receiver had recorded the event processed already,
	// and answered 200.
	Duplicate bool
	// ClientNames are the common names of the client certificates, over
	// TLS.
	ClientNames []string
	// Status is what the receiver answered (0 while it has not).
	Status int
	// Cut: the sender hung up before the answer.
	Cut bool
}

// Answered2xx says whether the request was answered with a 2xx.
func (r Request) Answered2xx() bool { return r.Status >= 200 && r.Status < 300 }

// Options configure a Receiver.
type Options struct {
	// Respond decides the status of each request; nil answers 204. It may
	// block, for a receiver that hangs (req's context ends when the sender
	// hangs up), except while the Receiver knows secrets: then it runs in
	// the transaction that records the event, and must not.
	Respond func(req *http.Request, r *Request) int
	// Verify answers 401, before Respond is asked, to a request whose
	// signature does not verify (every request while no secret is known).
	Verify bool
	// Delay holds each answer (a slow receiver); a sender that hangs up
	// meanwhile is recorded as Cut and answered nothing.
	Delay time.Duration
	// TLS, when set, serves HTTPS with it.
	TLS *tls.Config
	// Body, when set, writes the answer's body.
	Body func(req *http.Request) string
}

// Receiver is a real webhook receiver on loopback; see the package doc.
type Receiver struct {
	srv  *httptest.Server
	opts Options
	rcv  atomic.Pointer[receiver.Receiver]
	dir  string // the de-duplication database's

	mu       sync.Mutex
	log      []Request
	byID     map[string]int // requests per webhook-id
	inFlight map[string]int // per webhook-id
	overlaps int
	closers  []io.Closer
}

// New starts a Receiver; Close stops it.
func New(opts Options) *Receiver {
	r := &Receiver{opts: opts, byID: map[string]int{}, inFlight: map[string]int{}}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if opts.TLS != nil {
		r.srv.TLS = opts.TLS
		r.srv.StartTLS()
	} else {
		r.srv.Start()
	}
	return r
}

// URL is the receiver's base URL; it answers on every path.
func (r *Receiver) URL() string { return r.srv.URL }

// Server is the underlying server, for its client and certificate.
func (r *Receiver) Server() *httptest.Server { return r.srv }

// Close stops the server and removes the de-duplication database.
func (r *Receiver) Close() {
	r.srv.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.closers {
		_ = c.Close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// UseSecrets makes the receiver verify and de-duplicate through
// pkg/receiver with the endpoint's signing secrets ("whsec_..."), from
// the next request on, in a database of its own (SQLite).
func (r *Receiver) UseSecrets(secrets ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == "" {
		dir, err := os.MkdirTemp("", "test-receiver-")
		if err != nil {
			return err
		}
		r.dir = dir
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(r.dir, fmt.Sprintf("received-%d.db", len(r.closers)))+
		"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		return err
	}
	r.closers = append(r.closers, db)
	rcv, err := receiver.New(context.Background(), db, receiver.Options{Secrets: secrets})
	if err != nil {
		return err
	}
	r.rcv.Store(rcv)
	return nil
}

// errNot2xx rolls back the record of an event the test answered with
// anything but a 2xx: it is not processed, and its retry is no duplicate.
var errNot2xx = errors.New("answered without a 2xx")

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, receiver.DefaultMaxBodyBytes))
	rc := Request{At: time.Now(), Path: req.URL.Path, WebhookID: req.Header.Get("webhook-id"),
		DeliveryID: req.Header.Get(receiver.DeliveryIDHeader)}
	var env struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(body, &env)
	rc.Type, rc.Data = env.Type, env.Data
	if req.TLS != nil {
		for _, c := range req.TLS.PeerCertificates {
			rc.ClientNames = append(rc.ClientNames, c.Subject.CommonName)
		}
	}
	i := r.arrived(&rc)
	defer r.left(rc.WebhookID)

	if r.opts.Delay > 0 && !r.hold(req.Context()) {
		r.update(i, func(l *Request) { l.Cut = true })
		return
	}
	status := r.answer(req, body, &rc)
	r.update(i, func(l *Request) { l.Status, l.Verified, l.Duplicate = status, rc.Verified, rc.Duplicate })
	w.WriteHeader(status)
	if r.opts.Body != nil {
		_, _ = io.WriteString(w, r.opts.Body(req))
	}
}

// answer decides the status: through pkg/receiver when secrets are known,
// else Respond's (or 401 with Verify).
func (r *Receiver) answer(req *http.Request, body []byte, rc *Request) int {
	rcv := r.rcv.Load()
	if rcv == nil {
		if r.opts.Verify {
			return http.StatusUnauthorized
		}
		return r.respond(req, rc)
	}
	status := 0
	req.Body = io.NopCloser(bytes.NewReader(body))
	res := rcv.Receive(httptest.NewRecorder(), req, func(context.Context, *sql.Tx, *receiver.Event) error {
		rc.Verified = true
		if status = r.respond(req, rc); status < 200 || status > 299 {
			return errNot2xx
		}
		return nil
	})
	rc.Verified = res.WebhookID != ""
	switch {
	case res.Duplicate:
		rc.Duplicate = true
		return res.Status
	case status != 0:
		return status // Respond's, committed with a 2xx or rolled back
	case r.opts.Verify || rc.Verified:
		return res.Status // refused (401, 400) or failed before Respond
	default:
		return r.respond(req, rc)
	}
}

func (r *Receiver) respond(req *http.Request, rc *Request) int {
	if r.opts.Respond == nil {
		return http.StatusNoContent
	}
	return r.opts.Respond(req, rc)
}

// hold waits Delay; false when the sender hung up first.
func (r *Receiver) hold(ctx context.Context) bool {
	t := time.NewTimer(r.opts.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// arrived records a request and returns its index in the log.
func (r *Receiver) arrived(rc *Request) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[rc.WebhookID]++
	rc.N = r.byID[rc.WebhookID]
	if r.inFlight[rc.WebhookID]++; r.inFlight[rc.WebhookID] > 1 {
		r.overlaps++
	}
	r.log = append(r.log, *rc)
	return len(r.log) - 1
}

func (r *Receiver) left(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[id]--; r.inFlight[id] == 0 {
		delete(r.inFlight, id)
	}
}

func (r *Receiver) update(i int, f func(*Request)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.log[i])
}

// Requests returns what the receiver got, in arrival order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.log...)
}

// Of returns the requests carrying one webhook-id.
func (r *Receiver) Of(webhookID string) []Request {
	var out []Request
	for _, rc := range r.Requests() {
		if rc.WebhookID == webhookID {
			out = append(out, rc)
		}
	}
	return out
}

// Counts returns the requests per webhook-id and their total.
func (r *Receiver) Counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byID))
	for id, n := range r.byID {
		out[id] = n
	}
	return out, len(r.log)
}

// Events is how many distinct webhook-ids the receiver got.
func (r *Receiver) Events() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

// Total is how many requests the receiver got.
func (r *Receiver) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.log)
}

// Repeated lists the webhook-ids received more than once, sorted, as
// "<id> x<requests>".
func (r *Receiver) Repeated() []string {
	byID, _ := r.Counts()
	var out []string
	for id, n := range byID {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", id, n))
		}
	}
	slices.Sort(out)
	return out
}

// Count is how many requests carried webhookID.
func (r *Receiver) Count(webhookID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[webhookID]
}

// InFlight is how many requests the receiver holds: received, not answered.
func (r *Receiver) InFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.inFlight {
		n += c
	}
	return n
}

// Overlaps is how many requests arrived while another of the same
// webhook-id was in flight: one event received twice at the same moment.
func (r *Receiver) Overlaps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overlaps
}

// FirstAnswered2xx is, per webhook-id, when its first request answered
// with a 2xx arrived.
func (r *Receiver) FirstAnswered2xx() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Time{}
	for _, rc := range r.log {
		if _, ok := out[rc.WebhookID]; !ok && rc.Answered2xx() {
			out[rc.WebhookID] = rc.At
		}
	}
	return out
}

// String is what a failure shows: one line per request, no data.
func (r *Receiver) String() string {
	var b strings.Builder
	for _, rc := range r.Requests() {
		fmt.Fprintf(&b, "%s webhook-id=%s delivery=%s type=%s verified=%t duplicate=%t cut=%t -> %d\n",
			rc.At.Format("15:04:05.000"), rc.WebhookID, rc.DeliveryID, rc.Type, rc.Verified, rc.Duplicate, rc.Cut, rc.Status)
	}
	if b.Len() == 0 {
		return "(nothing received)"
	}
	return b.String()
}
