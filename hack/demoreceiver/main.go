// Command demoreceiver plays the receivers of `make demo` on one loopback
// listener:
//
//   - /confirmations: a fan-confirmation service that is down (503) while
//     the outage is on, and records what it receives;
//   - /producer: the producer's reissue handler: on a
//     hookkeeper.reissue.requested event it mints a fresh token and
//     publishes the replacement, linked by reissueOf, through the API;
//   - /n8n: an ingress in front of a workflow: it accepts (202) and then
//     posts a signed acknowledgement that rejects the event;
//   - /control/outage?on=false ends the outage; /control/log lists what the
//     confirmation service received.
//
// Every request's Standard Webhooks signature is verified with the
// endpoint's secret, read from files named by --secret-dir (one per path).
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/pkg/receiver"
)

type receipt struct {
	EventID string `json:"eventID"`
	Token   string `json:"token"`
	Status  int    `json:"status"`
}

type server struct {
	api, token, secretDir string
	outage                atomic.Bool
	mu                    sync.Mutex
	log                   []receipt
	client                *http.Client
}

func main() {
	s := &server{client: &http.Client{Timeout: 10 * time.Second}}
	addr := flag.String("listen", "127.0.0.1:18100", "listen address")
	flag.StringVar(&s.api, "api", "http://127.0.0.1:18090", "hookkeeper's HTTP API")
	flag.StringVar(&s.token, "token", "", "bearer token for publishing")
	flag.StringVar(&s.secretDir, "secret-dir", ".dev/secrets", "directory with one whsec_ file per receiver (confirmations, producer, n8n)")
	flag.Parse()
	s.outage.Store(true)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /confirmations", s.confirmations)
	mux.HandleFunc("POST /producer", s.producer)
	mux.HandleFunc("POST /n8n", s.n8n)
	mux.HandleFunc("POST /control/outage", func(w http.ResponseWriter, r *http.Request) {
		s.outage.Store(r.URL.Query().Get("on") != "false")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /control/log", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(s.log)
	})
	log.Printf("demo receivers on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

type envelope struct {
	ID   string         `json:"id"`
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

// verified reads and verifies a delivery signed with the secret of name.
func (s *server) verified(w http.ResponseWriter, r *http.Request, name string) (*envelope, []byte, bool) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	secret, err := os.ReadFile(filepath.Join(s.secretDir, name))
	if err != nil {
		http.Error(w, "no secret yet", http.StatusServiceUnavailable)
		return nil, nil, false
	}
	err = signing.Verify([]sensitive.Bytes{sensitive.Bytes(bytes.TrimSpace(secret))}, r.Header.Get(signing.HeaderID),
		r.Header.Get(signing.HeaderTimestamp), r.Header.Get(signing.HeaderSignature), body, time.Now(), signing.DefaultTolerance)
	if err != nil {
		log.Printf("%s: signature rejected: %v", name, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return nil, nil, false
	}
	var env envelope
	_ = json.Unmarshal(body, &env)
	return &env, secret, true
}

func (s *server) confirmations(w http.ResponseWriter, r *http.Request) {
	env, _, ok := s.verified(w, r, "confirmations")
	if !ok {
		return
	}
	status := http.StatusNoContent
	if s.outage.Load() {
		status = http.StatusServiceUnavailable
	}
	tok, _ := env.Data["confirmToken"].(string)
	s.mu.Lock()
	s.log = append(s.log, receipt{EventID: env.ID, Token: tok, Status: status})
	s.mu.Unlock()
	log.Printf("confirmations: %s token=%s -> %d", env.ID, tok, status)
	w.WriteHeader(status)
}

func (s *server) producer(w http.ResponseWriter, r *http.Request) {
	env, _, ok := s.verified(w, r, "producer")
	if !ok {
		return
	}
	if env.Type != receiver.ReissueRequestedEventType {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	orig, _ := env.Data["originalEventID"].(string)
	var b [8]byte
	_, _ = rand.Read(b[:])
	token := "tok_" + hex.EncodeToString(b[:])
	body := fmt.Sprintf(`{"type":"fan.confirmation_requested","data":{"fan":7},"secrets":{"confirmToken":%q},"reissueOf":%q}`, token, orig)
	req, _ := http.NewRequest(http.MethodPost, s.api+"/v1/namespaces/demo/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "reissue-of-"+orig)
	resp, err := s.client.Do(req)
	if err != nil {
		log.Printf("producer: publishing the replacement: %v", err)
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	resp.Body.Close()
	log.Printf("producer: reissued %s with a fresh token (HTTP %d)", orig, resp.StatusCode)
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) n8n(w http.ResponseWriter, r *http.Request) {
	_, secret, ok := s.verified(w, r, "n8n")
	if !ok {
		return
	}
	delivery := r.Header.Get(dispatch.DeliveryIDHeader)
	w.WriteHeader(http.StatusAccepted)
	go s.reject(delivery, sensitive.Bytes(bytes.TrimSpace(secret)))
}

// reject posts a signed acknowledgement that rejects the delivery, as a
// workflow does when the business step fails.
func (s *server) reject(delivery string, secret sensitive.Bytes) {
	body := []byte(fmt.Sprintf(`{"deliveryID":%q,"outcome":"rejected","reason":"fan already confirmed by another channel"}`, delivery))
	now := time.Now()
	msgID := "ack_" + delivery
	sig, err := signing.Sign(secret, msgID, now, body)
	if err != nil {
		log.Printf("n8n: signing the ack: %v", err)
		return
	}
	req, _ := http.NewRequest(http.MethodPost, s.api+"/v1/acks/"+delivery, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signing.HeaderID, msgID)
	req.Header.Set(signing.HeaderTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(signing.HeaderSignature, sig)
	resp, err := s.client.Do(req)
	if err != nil {
		log.Printf("n8n: posting the ack: %v", err)
		return
	}
	resp.Body.Close()
	log.Printf("n8n: rejected %s (HTTP %d)", delivery, resp.StatusCode)
}
