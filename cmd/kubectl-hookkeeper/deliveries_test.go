package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	deliveryv1 "github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
)

func at(s int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 12, 1, 12, 0, s, 0, time.UTC))
}

func event(name, typ, reissueOf string) deliveryv1.WebhookEvent {
	return deliveryv1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(0)},
		Spec:       deliveryv1.WebhookEventSpec{Type: typ, ReissueOf: reissueOf},
	}
}

func delivery(name, event, endpoint, state string, attempts ...deliveryv1.Attempt) deliveryv1.Delivery {
	d := deliveryv1.Delivery{ObjectMeta: metav1.ObjectMeta{Name: name}}
	d.Spec = deliveryv1.DeliverySpec{Event: event, Endpoint: endpoint}
	d.Status.State, d.Status.Attempts, d.Status.AttemptCount = state, attempts, int32(len(attempts))
	if n := len(attempts); n > 0 {
		d.Status.LastStatus = attempts[n-1].StatusCode
	}
	return d
}

func attempt(n int32, status int32, errText string) deliveryv1.Attempt {
	return deliveryv1.Attempt{Number: n, StartedAt: at(int(n)), Duration: metav1.Duration{Duration: 12 * time.Millisecond}, StatusCode: status, Error: errText}
}

// sampleTrace is an event with every kind of node: attempts with and
// without a response, omitted attempts, a retry under its original, a
// reissue's event under the delivery it replaced.
func sampleTrace() *traced {
	exhausted := delivery("dlv_a", "evt_1", "billing", "Exhausted", attempt(1, 503, "HTTP 503"), attempt(2, 0, "connection refused"))
	exhausted.Status.Reason, exhausted.Status.Resolution = "MaxAttempts", "Reissued"
	exhausted.Status.ReplacedBy = &deliveryv1.Replacement{Delivery: "dlv_c", Event: "evt_2"}
	exhausted.Status.AttemptsOmitted = 3
	retriedOnce := delivery("dlv_b", "evt_1", "audit", "Exhausted", attempt(1, 500, "HTTP 500"))
	retriedOnce.Status.Resolution = "Retried"
	retriedOnce.Status.ReplacedBy = &deliveryv1.Replacement{Delivery: "dlv_r", Event: "evt_1"}
	retry := delivery("dlv_r", "evt_1", "audit", "Delivered", attempt(1, 204, ""))
	retry.Spec.RetryOf = "dlv_b"
	// The reissue was published traced (ADR 0051), the original not.
	traced2 := delivery("dlv_c", "evt_2", "billing", "Delivered", attempt(1, 200, ""))
	traced2.Spec.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

	return &traced{
		event:      event("evt_1", "order.paid", ""),
		deliveries: []deliveryv1.Delivery{exhausted, retriedOnce, retry},
		reissues: map[string]*traced{"evt_2": {
			event:      event("evt_2", "order.paid", "evt_1"),
			deliveries: []deliveryv1.Delivery{traced2},
		}},
	}
}

// TestRenderTrace: every kind of node of sampleTrace (a traced event shows
// its trace ID), and an event
// without deliveries, in its place in the tree.
func TestRenderTrace(t *testing.T) {
	tr := sampleTrace()
	want := `webhookevent/evt_1 order.paid, created 2026-12-01T12:00:00Z
├── delivery/dlv_a to billing: Exhausted (MaxAttempts), 2 attempts, resolution Reissued
│   ├── 3 older attempts not shown
│   ├── attempt 1 at 2026-12-01T12:00:01Z took 12ms: HTTP 503: HTTP 503
│   ├── attempt 2 at 2026-12-01T12:00:02Z took 12ms: no response: connection refused
│   └── reissued as webhookevent/evt_2 order.paid, created 2026-12-01T12:00:00Z, reissues evt_1, trace 4bf92f3577b34da6a3ce929d0e0e4736
│       └── delivery/dlv_c to billing: Delivered, 1 attempt, last HTTP 200
│           └── attempt 1 at 2026-12-01T12:00:01Z took 12ms: HTTP 200
└── delivery/dlv_b to audit: Exhausted, 1 attempt, last HTTP 500, resolution Retried
    ├── attempt 1 at 2026-12-01T12:00:01Z took 12ms: HTTP 500: HTTP 500
    └── delivery/dlv_r to audit: Delivered, 1 attempt, last HTTP 204
        └── attempt 1 at 2026-12-01T12:00:01Z took 12ms: HTTP 204
`
	if got := renderTrace(tr); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := renderTrace(&traced{event: event("evt_9", "a", "")}); got != "webhookevent/evt_9 a, created 2026-12-01T12:00:00Z\n└── no deliveries\n" {
		t.Errorf("no deliveries: %q", got)
	}
}

func TestTestEvent(t *testing.T) {
	ev, err := testEvent("shop", "billing", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Name != "" || ev.Namespace != "shop" || ev.Spec.Type != TestEventType || ev.Spec.Endpoint != "billing" ||
		string(ev.Spec.Data.Raw) != `{"endpoint":"billing","sentAt":"2026-12-01T12:00:00Z","sentBy":"kubectl hookkeeper send-test"}` {
		t.Errorf("test event %+v data %s", ev, ev.Spec.Data.Raw)
	}
}

// TestTraceOutput: trace -o prints a v1 List of the events and deliveries
// in the tree's order, which parses as JSON and YAML with every item's
// kind, and names them with -o name as kubectl does.
func TestTraceOutput(t *testing.T) {
	p := newPlugin(genericiooptions.NewTestIOStreamsDiscard())
	wantNames := []string{"evt_1", "dlv_a", "dlv_b", "dlv_r", "evt_2", "dlv_c"}
	wantKinds := []string{"WebhookEvent", "Delivery", "Delivery", "Delivery", "WebhookEvent", "Delivery"}
	for _, format := range []string{"json", "yaml"} {
		pr, err := outputAs(t, format).printer()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := p.printList(pr, sampleTrace().objects(), &b); err != nil {
			t.Fatal(err)
		}
		var list struct {
			APIVersion, Kind string
			Items            []struct {
				APIVersion, Kind string
				Metadata         struct{ Name string }
				Status           struct{ Attempts []deliveryv1.Attempt }
			}
		}
		if err := parseAs(format, b.Bytes(), &list); err != nil {
			t.Fatalf("%s does not parse: %v\n%s", format, err, b.String())
		}
		if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != len(wantNames) {
			t.Fatalf("%s: %s %s with %d items, want a v1 List of %d:\n%s", format, list.APIVersion, list.Kind, len(list.Items), len(wantNames), b.String())
		}
		for i, it := range list.Items {
			if it.Metadata.Name != wantNames[i] || it.Kind != wantKinds[i] || it.APIVersion != "delivery.hookkeeper.dev/v1alpha1" {
				t.Errorf("%s: item %d is %s %s %s, want %s %s", format, i, it.APIVersion, it.Kind, it.Metadata.Name, wantKinds[i], wantNames[i])
			}
		}
		if got := list.Items[1].Status.Attempts; len(got) != 2 || got[1].Error != "connection refused" {
			t.Errorf("%s: dlv_a's attempts %+v", format, got)
		}
	}
	pr, err := outputAs(t, "name").printer()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := p.printList(pr, sampleTrace().objects(), &b); err != nil {
		t.Fatal(err)
	}
	want := "webhookevent.delivery.hookkeeper.dev/evt_1\ndelivery.delivery.hookkeeper.dev/dlv_a\ndelivery.delivery.hookkeeper.dev/dlv_b\n" +
		"delivery.delivery.hookkeeper.dev/dlv_r\nwebhookevent.delivery.hookkeeper.dev/evt_2\ndelivery.delivery.hookkeeper.dev/dlv_c\n"
	if b.String() != want {
		t.Errorf("-o name:\n%s\nwant\n%s", b.String(), want)
	}
}

// parseAs parses printed output as JSON (encoding/json, so YAML would
// not pass) or YAML.
func parseAs(format string, data []byte, v any) error {
	if format == "json" {
		return json.Unmarshal(data, v)
	}
	return yaml.Unmarshal(data, v)
}

// outputAs is the -o flags of a verb given -o format.
func outputAs(t *testing.T, format string) *outputFlags {
	t.Helper()
	cmd := &cobra.Command{}
	o := addOutputFlags(cmd, false)
	if err := cmd.Flags().Parse([]string{"-o", format}); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestOutputRefused: an unknown -o, and -o wide where there is no table,
// are refused before anything is created, with the formats named.
func TestOutputRefused(t *testing.T) {
	for format, want := range map[string]string{
		"bogus": `unable to match a printer suitable for the output format "bogus", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,yaml`,
		"wide":  "-o wide: only status prints a table; use one of json, yaml, kyaml, name,",
	} {
		if _, err := outputAs(t, format).printer(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-o %s: %v, want %q", format, err, want)
		}
	}
}
