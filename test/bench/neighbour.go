package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// The noisy-neighbour step (issue #43): namespace nb publishes 10
// events/s to one healthy endpoint, alone, then while namespace na
// publishes to 20 endpoints whose receiver hangs 3 s and answers 503 (20
// events/s), then while na publishes 100 events/s to 20 endpoints that
// fail at once. nb's publish-to-receipt latency is compared across the
// three. In this process: the engine (its defaults: 128 workers), a
// durable SQLite ledger and loopback receivers; each run on a fresh ledger.

const neighbourHeading = "## A noisy neighbour (issue #43)"

const (
	neighbourQuietRate = 10
	neighbourEndpoints = 20
)

type neighbourRun struct {
	name              string
	noisyRate         int
	hang              time.Duration
	published, landed int
	latency           []time.Duration
	noisyPublished    int
	// quota is na's WebhookQuota rate (0: none); noisyRefused its
	// publishes refused for it, and allowed what the quota allows over
	// the run (rate × duration + burst).
	quota        int
	noisyRefused int
	allowed      int
	// defaultPolicy gives na's endpoints the manager's default
	// RetryPolicy instead of the aggressive one (200 ms, 20 attempts).
	defaultPolicy bool
}

// neighbourQuota is na's quota in the runs with one: nb's rate, its share,
// which na offers ten times. Its burst of 2 lets a publish that comes a
// tick after its place keep the rate (with a burst of 1 each late one
// pushes the schedule back: 188 of 201).
const (
	neighbourQuota      = neighbourQuietRate
	neighbourQuotaBurst = 2
)

func (r *neighbourRun) p(q float64) time.Duration {
	if len(r.latency) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(r.latency))
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

type neighbourResults struct {
	duration time.Duration
	runs     []*neighbourRun
}

func runNeighbour(cfg config, work string, r *neighbourResults) error {
	step("a noisy neighbour: one namespace's publish-to-receipt latency, alone and beside another whose receivers hang or fail")
	r.duration = cfg.neighbourDuration
	r.runs = []*neighbourRun{
		{name: "alone"},
		{name: "beside 20 hanging endpoints (3 s, then 503), 100 events/s offered, quota 10/s", noisyRate: 100, hang: 3 * time.Second, quota: neighbourQuota},
		{name: "beside 20 failing endpoints (503 at once), 100 events/s offered, quota 10/s", noisyRate: 100, quota: neighbourQuota},
		{name: "beside 20 failing endpoints (503 at once) on the default RetryPolicy, 100 events/s offered, quota 10/s", noisyRate: 100, quota: neighbourQuota, defaultPolicy: true},
		{name: "beside 20 failing endpoints (503 at once), 100 events/s, no quota", noisyRate: 100},
	}
	for i, run := range r.runs {
		if err := neighbourOnce(filepath.Join(work, fmt.Sprintf("neighbour-%d.db", i)), cfg.neighbourDuration, run); err != nil {
			return fmt.Errorf("%s: %w", run.name, err)
		}
		fmt.Printf("  %s: %d of %d events arrived, p50 %s, p99 %s (the noisy namespace published %d, %d refused over its quota, which allows %d)\n", run.name, run.landed, run.published,
			run.p(0.50).Round(time.Microsecond), run.p(0.99).Round(time.Microsecond), run.noisyPublished, run.noisyRefused, run.allowed)
	}
	return nil
}

// neighbourOnce publishes for d on a fresh ledger and engine and waits (up
// to a minute) for the quiet namespace's events to arrive.
func neighbourOnce(path string, d time.Duration, run *neighbourRun) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer store.Close()

	var mu sync.Mutex
	sent := map[string]time.Time{}
	arrived := map[string]time.Time{}
	quiet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get(signing.HeaderID)
		mu.Lock()
		if _, ok := arrived[id]; !ok {
			arrived[id] = time.Now()
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer quiet.Close()
	closing := make(chan struct{})
	noisy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if run.hang > 0 {
			select {
			case <-time.After(run.hang):
			case <-closing:
			case <-req.Context().Done():
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer noisy.Close()
	defer close(closing)

	eng, err := engine.New(engine.Options{Store: store, ShutdownGrace: time.Millisecond})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Printf("  the engine: %v\n", err)
		}
		eng.Close()
	}()

	pol := ledger.Policy{
		Backoff: backoff.Policy{Strategy: backoff.Fixed, InitialDelay: 200 * time.Millisecond, MaxAttempts: 20, AttemptTimeout: 5 * time.Second},
		RetryOn: []string{"NetworkError", "Timeout", "5xx"},
	}
	policyOf := func(ns string) ledger.Policy {
		if ns == "na" && run.defaultPolicy {
			return retrypolicy.DefaultPolicy()
		}
		return pol
	}
	register := func(ns, name, url string) error {
		secret, err := signing.GenerateSecret()
		if err != nil {
			return err
		}
		_, err = eng.RegisterEndpoint(ctx, ledger.Endpoint{
			ID: ledger.EndpointID(ns, name), Namespace: ns, Name: name, URL: url, EventTypes: []string{"*"},
			Secrets: []ledger.SigningSecret{{Value: secret}}, Policy: policyOf(ns), AckMode: ledger.AckResponse,
		})
		return err
	}
	if err := register("nb", "orders", quiet.URL); err != nil {
		return err
	}
	if run.quota > 0 {
		if _, err := store.QuotaSet(ctx, &ledger.QuotaSetParams{Namespace: "na",
			Hard: ledger.QuotaHard{PublishesPerSecond: int64(run.quota), PublishBurst: neighbourQuotaBurst}, Now: time.Now()}); err != nil {
			return err
		}
	}
	for i := range neighbourEndpoints {
		if err := register("na", fmt.Sprintf("ep-%02d", i), noisy.URL); err != nil {
			return err
		}
	}
	publishAt := func(ns string, rate int, count, refused *int, record bool) error {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		started := time.Now()
		deadline := started.Add(d)
		defer func() {
			if run.quota > 0 && ns == "na" {
				run.allowed = int(time.Since(started).Seconds()*float64(run.quota)) + neighbourQuotaBurst
			}
		}()
		for time.Now().Before(deadline) {
			<-tick.C
			now := time.Now()
			id := ledger.NewID("evt", now)
			res, err := eng.Publish(ctx, &ledger.EventInsertParams{ID: id, Namespace: ns, Type: "order.created",
				Data: json.RawMessage(`{"n":1}`), Now: now})
			if err == nil {
				err = res.Err
			}
			if errors.Is(err, ledger.ErrQuotaExceeded) && refused != nil {
				*refused++
				continue
			}
			if err != nil {
				return err
			}
			if record {
				mu.Lock()
				sent[id] = now
				mu.Unlock()
			}
			*count++
		}
		return nil
	}
	var wg sync.WaitGroup
	var noisyErr error
	if run.noisyRate > 0 {
		wg.Go(func() { noisyErr = publishAt("na", run.noisyRate, &run.noisyPublished, &run.noisyRefused, false) })
	}
	quietErr := publishAt("nb", neighbourQuietRate, &run.published, nil, true)
	wg.Wait()
	if err := errors.Join(quietErr, noisyErr); err != nil {
		return err
	}
	// What has not arrived a minute after the last publish counts as lost.
	wait := time.Now().Add(time.Minute)
	for time.Now().Before(wait) {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= run.published {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling a count the receiver fills, not a synchronisation in a test
	}
	mu.Lock()
	defer mu.Unlock()
	for id, at := range sent {
		if got, ok := arrived[id]; ok {
			run.landed++
			run.latency = append(run.latency, got.Sub(at))
		}
	}
	return nil
}

func (r *neighbourResults) markdown(machine string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n%s\n\n", neighbourHeading)
	p("Written by `go run ./test/bench --steps neighbour` (part of `make bench`) on %s.\n", time.Now().UTC().Format("2006-01-02"))
	p("Machine: %s.\n\n", machine)
	p("Namespace `nb` publishes %d events/s for %s to one healthy endpoint: alone, then beside namespace `na`\n", neighbourQuietRate, r.duration)
	p("publishing to %d endpoints whose receiver hangs or fails (issue #43's two cases). In this process: the engine\n", neighbourEndpoints)
	p("with its defaults (128 workers, fair shares: ADR 0046), a durable SQLite ledger, loopback receivers; a\n")
	p("fresh ledger per run. `na` offers ten times `nb`'s rate; in the runs with a quota, `na`'s WebhookQuota\n")
	p("(`publishesPerSecond: %d`, `publishBurst: %d`, ADR 0048) refuses what is over it. Latency is from the call\n", neighbourQuota, neighbourQuotaBurst)
	p("of `Publish` (its commit included) to the first receipt. Both namespaces' endpoints retry every 200 ms, 20 attempts (an aggressive\n")
	p("policy: a failing receiver is sent about 5 attempts a second per delivery), but in the run on the default\n")
	p("RetryPolicy (exponential from 5 s, doubling, 12 attempts), `na`'s.\n\n")
	p("| `nb`… | Arrived | Publish→receipt p50 | p99 | `na` accepted | `na` refused | quota allows |\n|---|---|---|---|---|---|---|\n")
	for _, run := range r.runs {
		allows := "—"
		if run.quota > 0 {
			allows = fmt.Sprint(run.allowed)
		}
		p("| %s | %d of %d | %s | %s | %d | %d | %s |\n", run.name, run.landed, run.published, run.p(0.50).Round(time.Microsecond),
			run.p(0.99).Round(time.Microsecond), run.noisyPublished, run.noisyRefused, allows)
	}
	if len(r.runs) > 1 && r.runs[0].p(0.99) > 0 {
		alone := r.runs[0].p(0.99)
		for _, run := range r.runs[1:] {
			share := 100 * float64(run.p(0.99)) / float64(alone)
			p("\nBeside %s: p99 **%.0f%%** of alone, every event arrived: %s (issue #43: ≤ 120%% and all).",
				strings.TrimPrefix(run.name, "beside "), share, verdict(share <= 120 && run.landed == run.published))
			if run.quota > 0 {
				held := 100 * float64(run.noisyPublished) / float64(max(run.allowed, 1))
				p(" `na` accepted **%.1f%%** of what its quota allows: %s (issue #43: within 1%%).", held, verdict(held <= 101 && held >= 99))
			}
			p("\n")
		}
	}
	return b.String()
}
