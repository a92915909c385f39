package publish

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// lastCommit accepts everything, keeps the last params, or fails with err.
type lastCommit struct {
	last *ledger.EventInsertParams
	err  error
}

func (c *lastCommit) Publish(_ context.Context, p *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	c.last = p
	return ledger.EventInsertResult{Event: ledger.Event{ID: p.ID}}, c.err
}

func newTestCore(t *testing.T, c Committer, mutate ...func(*Config)) *Core {
	t.Helper()
	cfg := Config{Committer: c, SecretsHashKey: []byte("k")}
	for _, m := range mutate {
		m(&cfg)
	}
	core, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return core
}

// TestTypedRequestIsItsJSONForm: a typed request and its JSON form are one
// request: the same canonical data and secrets, the same hash, so that a
// key used through one door replays through the other.
func TestTypedRequestIsItsJSONForm(t *testing.T) {
	c := &lastCommit{}
	core := newTestCore(t, c)
	doc := `{"type":"order.created","data":{"b":[1, 2],"a":{"y":true}},"secrets":{"t":"1"},"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz","endpoint":"billing"}`
	if _, err := core.PublishJSON(t.Context(), "shop", "k", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	fromJSON := c.last
	_, err := core.Publish(t.Context(), &Request{Namespace: "shop", IdempotencyKey: "k", Type: "order.created",
		Data: []byte("{ \"a\": {\"y\": true}, \"b\": [1,2] }"), Secrets: sensitive.Bytes(`{"t": "1"}`),
		ReissueOf: "evt_01hzzzzzzzzzzzzzzzzzzzzzzz", Endpoint: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	typed := c.last
	if !bytes.Equal(typed.BodyHash, fromJSON.BodyHash) || !bytes.Equal(typed.Data, fromJSON.Data) ||
		!bytes.Equal(typed.Secrets, fromJSON.Secrets) || typed.Endpoint != "shop/billing" || typed.Endpoint != fromJSON.Endpoint {
		t.Errorf("typed %+v\nJSON  %+v", typed, fromJSON)
	}
}

// TestTypedRequestRefusals: a typed request is refused by field and rule,
// as its JSON form would be, paths into data included.
func TestTypedRequestRefusals(t *testing.T) {
	core := newTestCore(t, &lastCommit{}, func(c *Config) { c.MaxSecrets = 1; c.MaxBytes = 1000 })
	ok := Request{Namespace: "shop", Type: "a", Data: []byte(`{}`)}
	for _, tc := range []struct {
		name  string
		edit  func(*Request)
		rule  Rule
		field string
	}{
		{"namespace", func(r *Request) { r.Namespace = "Shop" }, RuleInvalid, FieldNamespace},
		{"key", func(r *Request) { r.IdempotencyKey = "\x01" }, RuleInvalid, FieldIdempotencyKey},
		{"type", func(r *Request) { r.Type = "a b" }, RuleInvalid, "type"},
		{"no data", func(r *Request) { r.Data = nil }, RuleInvalid, "data"},
		{"data not an object", func(r *Request) { r.Data = []byte(`[1]`) }, RuleInvalid, "data"},
		{"data not JSON", func(r *Request) { r.Data = []byte(`{"a":}`) }, RuleJSON, "data"},
		{"duplicate in data", func(r *Request) { r.Data = []byte(`{"x":[{"k":1,"k":2}]}`) }, RuleJSON, "data.x[0].k"},
		{"secrets not an object", func(r *Request) { r.Secrets = sensitive.Bytes(`"s"`) }, RuleInvalid, "secrets"},
		{"too many secrets", func(r *Request) { r.Secrets = sensitive.Bytes(`{"a":"1","b":"2"}`) }, RuleTooManySecrets, "secrets"},
		{"secret collision", func(r *Request) { r.Data, r.Secrets = []byte(`{"t":1}`), sensitive.Bytes(`{"t":"x"}`) }, RuleSecretCollision, "secrets.t"},
		{"reissueOf", func(r *Request) { r.ReissueOf = "x" }, RuleInvalid, "reissueOf"},
		{"endpoint", func(r *Request) { r.Endpoint = "A" }, RuleInvalid, "endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			_, err := core.Publish(t.Context(), &r)
			fe, isField := errors.AsType[*FieldError](err)
			if !isField || !errors.Is(err, ErrInvalid) || fe.Rule != tc.rule || fe.Field != tc.field {
				t.Fatalf("err %v, want %s on %q", err, tc.rule, tc.field)
			}
		})
	}
	r := ok
	r.Data = []byte(`{"x":"` + string(bytes.Repeat([]byte("x"), 1000)) + `"}`)
	if _, err := core.Publish(t.Context(), &r); !errors.Is(err, ErrTooLarge) {
		t.Errorf("large request: %v, want ErrTooLarge", err)
	}
}

// TestCommitFailures: what the committer could not do is Unavailable with
// a retry-after when a retry may succeed, counted when the ledger is why,
// and internal otherwise.
func TestCommitFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		reason  UnavailableReason
		counted bool
	}{
		{"ledger unreachable", fmt.Errorf("insert: %w", ledger.ErrUnavailable), LedgerUnreachable, true},
		{"commit too slow", fmt.Errorf("insert: %w", context.DeadlineExceeded), CommitTimeout, true},
		{"caller gone", fmt.Errorf("insert: %w", context.Canceled), Canceled, false},
		{"stopping", fmt.Errorf("engine: %w", ErrStopping), Stopping, false},
		{"anything else", errors.New("boom"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			core := newTestCore(t, &lastCommit{err: tc.err}, func(c *Config) {
				c.Door, c.Metrics, c.RetryAfter = DoorHTTP, m, 3*time.Second
			})
			_, err := core.PublishJSON(t.Context(), "shop", "", []byte(`{"type":"a","data":{}}`))
			ue, unavailable := errors.AsType[*UnavailableError](err)
			switch {
			case tc.reason == "" && (unavailable || err == nil):
				t.Fatalf("err %v, want an internal error", err)
			case tc.reason != "" && (!unavailable || ue.Reason != tc.reason || ue.RetryAfter != 3*time.Second || !errors.Is(err, ErrUnavailable)):
				t.Fatalf("err %#v, want %s after 3s", err, tc.reason)
			}
			want := 0.0
			if tc.counted {
				want = 1
			}
			if got := m.LedgerUnavailable(DoorHTTP); got != want {
				t.Errorf("counted %v, want %v", got, want)
			}
		})
	}
}

// TestOutcomes: the ledger's per-event refusals become publishing's.
func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("key: %w", ledger.ErrIdempotencyConflict), ErrIdempotencyConflict},
		{&ledger.FanOutError{Namespace: "shop", Type: "a", Matches: 3, Max: 2}, ErrFanOut},
		{&ledger.TargetError{Namespace: "shop", Endpoint: "shop/billing"}, ErrUnknownEndpoint},
	} {
		core := newTestCore(t, outcome{tc.err})
		_, err := core.PublishJSON(t.Context(), "shop", "", []byte(`{"type":"a","data":{}}`))
		if !errors.Is(err, tc.want) {
			t.Errorf("%v became %v, want %v", tc.err, err, tc.want)
		}
	}
	_, err := newTestCore(t, outcome{&ledger.TargetError{Namespace: "shop", Endpoint: "shop/billing"}}).
		PublishJSON(t.Context(), "shop", "", []byte(`{"type":"a","data":{},"endpoint":"billing"}`))
	if ue, ok := errors.AsType[*UnknownEndpointError](err); !ok || ue.Endpoint != "billing" {
		t.Errorf("unknown endpoint: %v, want the name billing", err)
	}
}

type outcome struct{ err error }

func (o outcome) Publish(context.Context, *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	return ledger.EventInsertResult{Err: o.err}, nil
}

// TestThroughSharesTheCore: each door's view of one core counts under its
// own door and keeps the core's settings; the core itself is unchanged.
func TestThroughSharesTheCore(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	core := newTestCore(t, &lastCommit{err: fmt.Errorf("insert: %w", ledger.ErrUnavailable)}, func(c *Config) {
		c.Door, c.Metrics, c.MaxFanOut = DoorHTTP, m, 7
	})
	kube := core.Through(DoorKube)
	if _, err := kube.PublishJSON(t.Context(), "shop", "", []byte(`{"type":"a","data":{}}`)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err %v, want Unavailable", err)
	}
	if got, http := m.LedgerUnavailable(DoorKube), m.LedgerUnavailable(DoorHTTP); got != 1 || http != 0 {
		t.Errorf("counted kube %v, http %v; want 1 and 0", got, http)
	}
	if kube.Config().MaxFanOut != 7 || !bytes.Equal(kube.Config().SecretsHashKey, core.Config().SecretsHashKey) || core.Config().Door != DoorHTTP {
		t.Errorf("the view's settings %+v, the core's %+v", kube.Config(), core.Config())
	}
	if kube.slots != core.slots {
		t.Error("the view has filter slots of its own: a namespace would get one share of the cores per door")
	}
}
