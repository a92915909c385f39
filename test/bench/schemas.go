package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// The schema step (issue #25): what holding a publish to its type's
// 20-field schema costs. Like the filters step, in this process without
// HTTP: the publish core, the engine's group commit and a durable SQLite
// ledger. Two ledgers with the same endpoints, each behind its own core:
// one whose contracts give the type a contract with the schema, validated
// by internal/catalog as the manager does (the API server's CRD
// validator, compiled once), one whose contracts have none for the type.
// Every event conforms, so both commit the same rows and the difference
// is the validation. The validation costs the same whatever the fan-out,
// and a publish costs more the more deliveries it inserts, so the step
// runs at two fan-outs: one endpoint (the cheapest publish, where the
// validation weighs the most) and ten.

// schemaHeading starts the step's section of docs/benchmarks.md.
const schemaHeading = "## Schemas at publish"

// schemaFanOuts are the endpoints subscribed to the type in each run.
var schemaFanOuts = []int{1, 10}

const (
	// schemaPublishers and schemaRounds as in the filters step, for the
	// same reasons.
	schemaPublishers = 1
	schemaRounds     = 6
	// schemaFloor is the issue's: a publish with the schema within 15% of
	// one without.
	schemaFloor = 115.0
)

// benchSchema has 20 properties: strings with maxLength, numbers and
// integers with minimum, an enum, a boolean, a nested object and an array
// of objects.
const benchSchema = `{
  "type": "object",
  "required": ["orderId", "customerId", "amount", "currency", "status", "createdAt", "shipping", "lines"],
  "properties": {
    "orderId": {"type": "string", "maxLength": 32},
    "customerId": {"type": "string", "maxLength": 64},
    "email": {"type": "string", "maxLength": 254},
    "amount": {"type": "number", "minimum": 0},
    "tax": {"type": "number", "minimum": 0},
    "shippingCost": {"type": "number", "minimum": 0},
    "currency": {"type": "string", "enum": ["EUR", "USD", "GBP", "CHF"]},
    "status": {"type": "string", "maxLength": 16},
    "createdAt": {"type": "string", "maxLength": 40},
    "itemCount": {"type": "integer", "minimum": 1},
    "coupon": {"type": "string", "maxLength": 16},
    "gift": {"type": "boolean"},
    "note": {"type": "string", "maxLength": 500},
    "channel": {"type": "string", "maxLength": 32},
    "priority": {"type": "integer", "minimum": 0},
    "locale": {"type": "string", "maxLength": 16},
    "source": {"type": "string", "maxLength": 32},
    "campaign": {"type": "string", "maxLength": 64},
    "shipping": {"type": "object", "required": ["country", "postcode"], "properties": {
      "name": {"type": "string", "maxLength": 128},
      "street": {"type": "string", "maxLength": 128},
      "city": {"type": "string", "maxLength": 64},
      "country": {"type": "string", "maxLength": 2},
      "postcode": {"type": "string", "maxLength": 16}}},
    "lines": {"type": "array", "maxItems": 100, "items": {"type": "object", "required": ["sku", "quantity", "price"], "properties": {
      "sku": {"type": "string", "maxLength": 32},
      "quantity": {"type": "integer", "minimum": 1},
      "price": {"type": "number", "minimum": 0}}}}
  }
}`

// schemaData conforms to benchSchema: every property, three lines.
var schemaData = `{"orderId":"ord_8f3a9c1e","customerId":"cus_1f2e3d4c5b6a","email":"jane@example.com","amount":1500,"tax":285,` +
	`"shippingCost":4.9,"currency":"EUR","status":"placed","createdAt":"2026-12-01T15:04:05Z","itemCount":3,"coupon":"WINTER26",` +
	`"gift":false,"note":"leave it at the door","channel":"web","priority":2,"locale":"de-DE","source":"checkout","campaign":"winter-sale",` +
	`"shipping":{"name":"Jane Doe","street":"Hauptstrasse 1","city":"Berlin","country":"DE","postcode":"10115"},` +
	`"lines":[{"sku":"SKU-1","quantity":1,"price":500},{"sku":"SKU-2","quantity":2,"price":500},{"sku":"SKU-3","quantity":1,"price":0}]}`

// benchContracts is the wiring's publish.Contracts reduced to one
// namespace and type: contract, or none when nil.
type benchContracts struct{ contract *publish.Contract }

func (c benchContracts) Contract(_, _ string) (*publish.Contract, bool, error) {
	return c.contract, false, nil
}

// schemaContract is the contract the manager builds for a
// WebhookEventType with benchSchema (eventtype.EventTypeContracts).
func schemaContract() (*publish.Contract, error) {
	s, err := catalog.Compile([]byte(benchSchema))
	if err != nil {
		return nil, fmt.Errorf("compiling the bench's schema: %w", err)
	}
	return &publish.Contract{Name: "order-created", Generation: 1, Validate: func(data []byte) (string, string) {
		if v := s.Validate(data); v != nil {
			return v.Field, v.Message
		}
		return "", ""
	}}, nil
}

// schemaPair is one fan-out's runs: without a contract and with the
// schema.
type schemaPair struct {
	endpoints     int
	plain, schema filterRun
}

type schemaResults struct {
	pairs    []schemaPair
	duration time.Duration // per fan-out
	loadAvg  string
	// validation is Schema.Validate of one event, measured alone;
	// decoding is the encoding/json decode into interface{} it starts
	// with.
	validation, decoding time.Duration
	// shares is where a CPU profile of the validation alone puts its
	// time (validationStages).
	shares string
}

// validationStages are what a validation spends its time on, each named
// by the functions (pprof names: a suffix) that do it.
var validationStages = []struct{ label, fn string }{
	{"decoding the data (encoding/json into interface{})", "encoding/json.Unmarshal"},
	{"building a validator for each node of the schema, on every call (kube-openapi's validate.NewSchemaValidator)", "validate.NewSchemaValidator"},
	{"allocating", "runtime.mallocgc"},
	{"the garbage collector", "runtime.gcBgMarkWorker"},
}

// validationShares is the share of profile's samples under each of
// validationStages (cumulative: stages overlap where one calls another).
func validationShares(profile string) string {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=2000", profile).Output()
	if err != nil {
		return "(no profile: " + err.Error() + ")"
	}
	var parts []string
	for _, st := range validationStages {
		for line := range strings.SplitSeq(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 6 && strings.HasSuffix(f[5], st.fn) {
				parts = append(parts, fmt.Sprintf("%s %s", st.label, f[4]))
				break
			}
		}
	}
	return strings.Join(parts, "; ")
}

// schemaLedger is one ledger with its endpoints and a core on it.
type schemaLedger struct {
	*filterLedger
	endpoints int
}

func openSchemaLedger(ctx context.Context, path string, endpoints int, contract *publish.Contract) (*schemaLedger, error) {
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	for i := range endpoints {
		name := fmt.Sprintf("ep-%03d", i)
		_, err := store.EndpointUpsert(ctx, &ledger.EndpointUpsertParams{Now: time.Now(), Endpoint: ledger.Endpoint{
			ID: ledger.EndpointID("shop", name), Namespace: "shop", Name: name, URL: "https://receiver.example/" + name,
			EventTypes: []string{"order.*"}, Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_" + name)}},
			AckMode: ledger.AckResponse,
		}})
		if err != nil {
			_ = store.Close()
			return nil, err
		}
	}
	l := &filterLedger{store: store, batcher: groupcommit.New(store.EventInsertMany, groupcommit.Options{})}
	if l.core, err = publish.New(publish.Config{Committer: l, Contracts: benchContracts{contract: contract}}); err != nil {
		l.close()
		return nil, err
	}
	return &schemaLedger{filterLedger: l, endpoints: endpoints}, nil
}

// publishFor publishes schemaData from schemaPublishers goroutines for d,
// as filterLedger.publishFor does.
func (l *schemaLedger) publishFor(ctx context.Context, d time.Duration, run *filterRun) error {
	cpu0 := processCPU()
	deadline := time.Now().Add(d)
	var lat []time.Duration
	for time.Now().Before(deadline) {
		t0 := time.Now()
		res, err := l.core.Publish(ctx, &publish.Request{Namespace: "shop", Type: "order.created", Data: []byte(schemaData)})
		lat = append(lat, time.Since(t0))
		if err == nil && len(res.Deliveries) != l.endpoints {
			err = fmt.Errorf("%d deliveries, want %d", len(res.Deliveries), l.endpoints)
		}
		if err != nil {
			return err
		}
	}
	run.latency = append(run.latency, lat...)
	run.events += len(lat)
	run.cpu += processCPU() - cpu0
	return nil
}

// schemaValidation measures the CPU time of Schema.Validate of one event
// alone, and of the encoding/json decode into interface{} it starts with:
// this process's CPU time over two seconds of calls (the garbage
// collector's share included), not wall time, which the machine's other
// load would inflate.
func schemaValidation(contract *publish.Contract, profile string) (validate, decode time.Duration, err error) {
	data := []byte(schemaData)
	f, err := os.Create(profile)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return 0, 0, err
	}
	validate, err = cpuPerCall(func() error {
		if field, rule := contract.Validate(data); field != "" {
			return fmt.Errorf("the bench's data is refused: %s: %s", field, rule)
		}
		return nil
	})
	pprof.StopCPUProfile()
	if err != nil {
		return 0, 0, err
	}
	decode, err = cpuPerCall(func() error {
		var v any
		return json.Unmarshal(data, &v)
	})
	return validate, decode, err
}

// cpuPerCall is this process's CPU time per call of f over two seconds.
func cpuPerCall(f func() error) (time.Duration, error) {
	runtime.GC()
	cpu0, n := processCPU(), 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); n++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return (processCPU() - cpu0) / time.Duration(n), nil
}

func runSchemas(cfg config, work string, r *schemaResults) error {
	step(fmt.Sprintf("schemas at publish: a 20-field schema against none, %v endpoints", schemaFanOuts))
	contract, err := schemaContract()
	if err != nil {
		return err
	}
	r.duration = cfg.schemaDuration
	for _, n := range schemaFanOuts {
		pair := schemaPair{endpoints: n}
		if err := runSchemaPair(work, contract, cfg.schemaDuration, &pair); err != nil {
			return err
		}
		r.pairs = append(r.pairs, pair)
	}
	profile := filepath.Join(cfg.profileDir, "schema-validate.pprof")
	if r.validation, r.decoding, err = schemaValidation(contract, profile); err != nil {
		return err
	}
	r.shares = validationShares(profile)
	fmt.Printf("  where the validation's CPU goes: %s\n", r.shares)
	fmt.Printf("  the validation alone: %s per event (decoding the data into interface{}: %s)\n",
		r.validation.Round(time.Microsecond/10), r.decoding.Round(time.Microsecond/10))
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.loadAvg = strings.Join(strings.Fields(string(data))[:3], ", ")
	}
	for _, pair := range r.pairs {
		for _, x := range []struct {
			name string
			run  *filterRun
		}{{"without a contract", &pair.plain}, {"with the schema", &pair.schema}} {
			fmt.Printf("  %d endpoints, %s: %d events, p50 %s, p99 %s, CPU %s/event\n", pair.endpoints, x.name, x.run.events,
				x.run.p(0.50).Round(time.Microsecond), x.run.p(0.99).Round(time.Microsecond), x.run.cpuPerEvent().Round(time.Microsecond))
		}
	}
	return nil
}

// runSchemaPair publishes for d to two ledgers with pair.endpoints
// endpoints, one with the contract and one without, in alternated rounds.
func runSchemaPair(work string, contract *publish.Contract, d time.Duration, pair *schemaPair) error {
	ctx := context.Background()
	plain, err := openSchemaLedger(ctx, filepath.Join(work, fmt.Sprintf("schema-plain-%d.db", pair.endpoints)), pair.endpoints, nil)
	if err != nil {
		return err
	}
	defer plain.close()
	checked, err := openSchemaLedger(ctx, filepath.Join(work, fmt.Sprintf("schema-checked-%d.db", pair.endpoints)), pair.endpoints, contract)
	if err != nil {
		return err
	}
	defer checked.close()
	// The contract is in force: data that breaks it is refused.
	_, err = checked.core.Publish(ctx, &publish.Request{Namespace: "shop", Type: "order.created", Data: []byte(`{"amount": -1}`)})
	if !errors.Is(err, publish.ErrContract) {
		return fmt.Errorf("a publish that breaks the schema: %v, want a contract refusal", err)
	}
	// A short warm-up of each: page cache, the pools.
	if err := plain.publishFor(ctx, time.Second, &filterRun{}); err != nil {
		return err
	}
	if err := checked.publishFor(ctx, time.Second, &filterRun{}); err != nil {
		return err
	}
	each := d / schemaRounds
	runPlain := func() error {
		if err := plain.publishFor(ctx, each, &pair.plain); err != nil {
			return fmt.Errorf("publishing without a contract: %w", err)
		}
		return nil
	}
	runChecked := func() error {
		if err := checked.publishFor(ctx, each, &pair.schema); err != nil {
			return fmt.Errorf("publishing with the schema: %w", err)
		}
		return nil
	}
	for i := range schemaRounds {
		order := []func() error{runPlain, runChecked}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, run := range order {
			if err := run(); err != nil {
				return err
			}
		}
	}
	return nil
}

// markdown is the step's section of docs/benchmarks.md.
func (r *schemaResults) markdown(machine string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n%s\n\n", schemaHeading)
	p("Written by `go run ./test/bench --steps schema` (part of `make bench`) on %s.\n", time.Now().UTC().Format("2006-01-02"))
	p("Machine: %s; load average (1, 5, 15 min) %s after the step (the machine is shared).\n\n", machine, r.loadAvg)
	p("A publish of an `order.created` event whose type has a WebhookEventType with a 20-field schema\n")
	p("(strings with `maxLength`, numbers with `minimum`, an enum, a nested object, an array of objects;\n")
	p("`test/bench/schemas.go`) against the same publish with no WebhookEventType for the type. The\n")
	p("data (%d bytes: every property, three lines) conforms, so both commit the same rows. The\n", len(schemaData))
	p("schema is validated as the manager validates it: `internal/catalog`, the API server's CRD\n")
	p("validator, compiled once. In this process: the publish core, the engine's group commit and a\n")
	p("durable SQLite ledger (no HTTP); 1 publisher (one publish at a time), %s per fan-out, in %d\n", r.duration, schemaRounds)
	p("rounds, each ledger first in half of them. The validation costs the same at any fan-out; one\n")
	p("endpoint is the cheapest publish (one delivery), where it weighs the most. CPU is this\n")
	p("process's user and system time over the events published.\n\n")
	p("| Endpoints | | Events | Publish p50 | Publish p99 | CPU per event |\n|---|---|---|---|---|---|\n")
	for _, pair := range r.pairs {
		for _, x := range []struct {
			name string
			run  *filterRun
		}{{"Without a contract", &pair.plain}, {"With the 20-field schema", &pair.schema}} {
			p("| %d | %s | %d | %s | %s | %s |\n", pair.endpoints, x.name, x.run.events, x.run.p(0.50).Round(time.Microsecond),
				x.run.p(0.99).Round(time.Microsecond), x.run.cpuPerEvent().Round(time.Microsecond))
		}
	}
	p("\n")
	for _, pair := range r.pairs {
		p99 := filterShare(pair.schema.p(0.99), pair.plain.p(0.99))
		cpu := filterShare(pair.schema.cpuPerEvent(), pair.plain.cpuPerEvent())
		endpoints := "1 endpoint"
		if pair.endpoints != 1 {
			endpoints = fmt.Sprintf("%d endpoints", pair.endpoints)
		}
		p("- %s: with the schema, publish p99 **%.0f%%** and CPU per event **%.0f%%** of without (floor ≤ %.0f%%: %s);\n",
			endpoints, p99, cpu, schemaFloor, verdict(p99 <= schemaFloor && cpu <= schemaFloor))
		p("  the schema adds %s of CPU per event.\n", (pair.schema.cpuPerEvent() - pair.plain.cpuPerEvent()).Round(time.Microsecond))
	}
	p("\nThe validation's own work, measured alone in the same run (CPU time), is **%s per event**, of which\n", r.validation.Round(time.Microsecond/10))
	p("%s decode the data into `interface{}` values (encoding/json, as the validator needs them);\n", r.decoding.Round(time.Microsecond/10))
	p("the rest is kube-openapi's validator walking the schema. A CPU profile of the validation alone\n")
	p("(cumulative shares; they overlap): %s. What the schema adds to a publish's CPU\n", r.shares)
	p("can exceed the validation alone: its garbage is collected while the publish path runs.\n")
	p("\n%s", schemaRemedies)
	return b.String()
}

// schemaRemedies says how the validation got to its cost, and what is
// left to take.
const schemaRemedies = `How it got here. kube-openapi, on every call, builds a validator for every node of the
schema it visits, each with eight sub-validators, and boxes every value: about 1,000
allocations per conforming 20-field event (` + "`go test ./internal/catalog -bench Validate20`" + `: 437µs
a call on this machine under this load). internal/catalog now accepts a conforming event with a
check compiled once from the schema (type, properties, required, string enums, bounds of
numbers, strings and arrays, nullable): 51µs a call with the decode, 86 allocations. Data it
does not accept, and every schema with a keyword it does not know (pattern, format,
additionalProperties, int-or-string, allOf...), go to kube-openapi, which decides and words
the refusal; FuzzFastAgreesWithTheValidator (make fuzz) holds the check to never accepting
what kube-openapi refuses. What is left: the decode (the publish core already parses the
data for its hash; one parse would do), and the keywords the check does not know yet.
`
