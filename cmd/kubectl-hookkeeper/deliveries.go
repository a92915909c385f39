package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1 "github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
)

func (p *plugin) sendTestCommand() *cobra.Command {
	var timeout time.Duration
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "send-test ENDPOINT [--timeout 2m]",
		Short: "Publish a hookkeeper.test event to ENDPOINT only and wait for its outcome",
		Long: `Publish a hookkeeper.test WebhookEvent addressed to ENDPOINT only (whatever its
eventTypes), follow its delivery printing each change, and at the end its
attempts: exit 0 when Delivered, 1 when Exhausted or Cancelled or still
pending at the timeout. With -o, print the delivery as it ended instead.`,
		Args: exactlyOne("ENDPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := positiveTimeout(timeout); err != nil {
				return err
			}
			s, err := p.open(out)
			if err != nil {
				return err
			}
			return p.sendTest(cmd.Context(), s, args[0], timeout, 500*time.Millisecond)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long to wait for the outcome.")
	out = addOutputFlags(cmd, false)
	return cmd
}

func (p *plugin) traceCommand() *cobra.Command {
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "trace EVENT",
		Short: "An event's deliveries, their attempts and any retry or reissue, as a tree",
		Long: `Print EVENT, each of its deliveries with its attempts, a recovery's retry under
the delivery it retried, and a reissue's new event (with its own
deliveries) under the delivery it replaced, as a tree. With -o, print them
as a List instead, each event followed by its deliveries.`,
		Args: exactlyOne("EVENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := p.open(out)
			if err != nil {
				return err
			}
			t, err := gatherTrace(cmd.Context(), s.c, s.ns, args[0], 0)
			if err != nil {
				return err
			}
			if s.pr != nil {
				return p.printList(s.pr, t.objects(), p.streams.Out)
			}
			_, err = fmt.Fprint(p.streams.Out, renderTrace(t))
			return err
		},
	}
	out = addOutputFlags(cmd, false)
	return cmd
}

// TestEventType is the type of the event send-test publishes.
const TestEventType = "hookkeeper.test"

// addDeliveryTypes registers the aggregated API's kinds under their one
// served version only (its AddToScheme also registers an internal version
// for the server, which would make a client's kind lookup ambiguous).
func addDeliveryTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(deliveryv1.SchemeGroupVersion,
		&deliveryv1.Delivery{}, &deliveryv1.DeliveryList{}, &deliveryv1.WebhookEvent{}, &deliveryv1.WebhookEventList{})
	metav1.AddToGroupVersion(s, deliveryv1.SchemeGroupVersion)
	return nil
}

// testEvent is the webhookevent send-test creates: addressed to endpoint
// only, whatever it subscribes to.
func testEvent(ns, endpoint string, now time.Time) (*deliveryv1.WebhookEvent, error) {
	data, err := json.Marshal(map[string]string{"sentBy": "kubectl hookkeeper send-test", "endpoint": endpoint, "sentAt": now.UTC().Format(time.RFC3339)})
	if err != nil {
		return nil, err
	}
	return &deliveryv1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec:       deliveryv1.WebhookEventSpec{Type: TestEventType, Endpoint: endpoint, Data: &runtime.RawExtension{Raw: data}},
	}, nil
}

// sendTest publishes a test event to endpoint through the aggregated API
// and follows its delivery (by field selector spec.event) until it is
// Delivered (nil), Exhausted or Cancelled (an error), printing each change
// and the attempts at the end, or with a printer (-o) the delivery as it
// ended.
func (p *plugin) sendTest(ctx context.Context, s *session, endpoint string, timeout, poll time.Duration) error {
	c, ns, pr, out := s.c, s.ns, s.pr, p.streams.Out
	if pr != nil {
		out = io.Discard
	}
	ev, err := testEvent(ns, endpoint, time.Now())
	if err != nil {
		return err
	}
	if err := c.Create(ctx, ev); err != nil {
		return fmt.Errorf("creating the test event: %w", err)
	}
	fmt.Fprintf(out, "webhookevent/%s created (%s to endpoint %s)\n", ev.Name, TestEventType, endpoint)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	last := ""
	for {
		var list deliveryv1.DeliveryList
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"spec.event": ev.Name}); err != nil {
			return fmt.Errorf("following the deliveries of webhookevent/%s: %w", ev.Name, err)
		}
		if len(list.Items) == 1 {
			d := &list.Items[0]
			if line := deliveryLine(d); line != last {
				fmt.Fprintln(out, line)
				last = line
			}
			switch d.Status.State {
			case "Delivered", "Exhausted", "Cancelled":
				var full deliveryv1.Delivery
				if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: d.Name}, &full); err != nil {
					return fmt.Errorf("reading delivery/%s: %w", d.Name, err)
				}
				for _, a := range full.Status.Attempts {
					fmt.Fprintln(out, "  "+attemptLine(a))
				}
				if pr != nil {
					if err := p.printObject(pr, &full, p.streams.Out); err != nil {
						return err
					}
				}
				if d.Status.State != "Delivered" {
					return fmt.Errorf("delivery/%s to %s is %s", d.Name, endpoint, d.Status.State)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhookevent/%s: no outcome after %s (last: %s)", ev.Name, timeout, orNone(last))
		case <-tick.C:
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "no delivery seen"
	}
	return s
}

// deliveryLine is one line of a delivery's progress or of a trace.
func deliveryLine(d *deliveryv1.Delivery) string {
	s := fmt.Sprintf("delivery/%s to %s: %s", d.Name, d.Spec.Endpoint, d.Status.State)
	if d.Status.Reason != "" {
		s += " (" + d.Status.Reason + ")"
	}
	s += fmt.Sprintf(", %d attempt%s", d.Status.AttemptCount, plural(d.Status.AttemptCount))
	if d.Status.LastStatus != 0 {
		s += fmt.Sprintf(", last HTTP %d", d.Status.LastStatus)
	}
	if d.Status.Resolution != "" {
		s += ", resolution " + d.Status.Resolution
	}
	return s
}

func plural(n int32) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// attemptLine is one attempt: number, start, duration, status, error.
func attemptLine(a deliveryv1.Attempt) string {
	status := "no response"
	if a.StatusCode != 0 {
		status = fmt.Sprintf("HTTP %d", a.StatusCode)
	}
	s := fmt.Sprintf("attempt %d at %s took %s: %s", a.Number, a.StartedAt.UTC().Format(time.RFC3339), a.Duration.Duration, status)
	if a.Error != "" {
		s += ": " + a.Error
	}
	return s
}

// traced is an event, its deliveries (attempts included) and the events
// that reissued them.
type traced struct {
	event      deliveryv1.WebhookEvent
	deliveries []deliveryv1.Delivery
	reissues   map[string]*traced // by the new event's name
}

// maxTraceDepth bounds how many reissues of reissues trace follows.
const maxTraceDepth = 8

// gatherTrace reads an event, its deliveries and, recursively, the events
// that reissued them, from the aggregated API.
func gatherTrace(ctx context.Context, c client.Client, ns, event string, depth int) (*traced, error) {
	t := &traced{reissues: map[string]*traced{}}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: event}, &t.event); err != nil {
		return nil, fmt.Errorf("reading webhookevent/%s: %w", event, err)
	}
	var list deliveryv1.DeliveryList
	for {
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{"spec.event": event}, client.Continue(list.Continue)); err != nil {
			return nil, fmt.Errorf("listing the deliveries of webhookevent/%s: %w", event, err)
		}
		for _, d := range list.Items {
			var full deliveryv1.Delivery
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: d.Name}, &full); err != nil {
				return nil, fmt.Errorf("reading delivery/%s: %w", d.Name, err)
			}
			t.deliveries = append(t.deliveries, full)
			if r := full.Status.ReplacedBy; r != nil && r.Event != "" && r.Event != event && depth < maxTraceDepth {
				sub, err := gatherTrace(ctx, c, ns, r.Event, depth+1)
				if err != nil {
					return nil, err
				}
				t.reissues[r.Event] = sub
			}
		}
		if list.Continue == "" {
			return t, nil
		}
	}
}

// objects are t's events and deliveries in the order of the tree: each
// event followed by its deliveries, then the events that reissued them.
func (t *traced) objects() []client.Object {
	objs := []client.Object{&t.event}
	for i := range t.deliveries {
		objs = append(objs, &t.deliveries[i])
	}
	for i := range t.deliveries {
		if r := t.deliveries[i].Status.ReplacedBy; r != nil {
			if sub := t.reissues[r.Event]; sub != nil {
				objs = append(objs, sub.objects()...)
			}
		}
	}
	return objs
}

// renderTrace prints t as a tree: the event, each delivery with its
// attempts, a retry under the delivery it retried, and a reissue's event
// (with its own deliveries) under the delivery it replaced.
func renderTrace(t *traced) string {
	var b strings.Builder
	writeTrace(&b, t, "")
	return b.String()
}

func writeTrace(b *strings.Builder, t *traced, indent string) {
	head := fmt.Sprintf("webhookevent/%s %s, created %s", t.event.Name, t.event.Spec.Type, t.event.CreationTimestamp.UTC().Format(time.RFC3339))
	if t.event.Spec.ReissueOf != "" {
		head += ", reissues " + t.event.Spec.ReissueOf
	}
	// Every delivery of an event shares its publish's trace.
	if len(t.deliveries) > 0 && t.deliveries[0].Spec.TraceID != "" {
		head += ", trace " + t.deliveries[0].Spec.TraceID
	}
	b.WriteString(head + "\n")
	byName := map[string]bool{}
	for _, d := range t.deliveries {
		byName[d.Name] = true
	}
	// Retries hang under the delivery they retried; the rest are roots.
	var roots []deliveryv1.Delivery
	retries := map[string][]deliveryv1.Delivery{}
	for _, d := range t.deliveries {
		if d.Spec.RetryOf != "" && byName[d.Spec.RetryOf] {
			retries[d.Spec.RetryOf] = append(retries[d.Spec.RetryOf], d)
		} else {
			roots = append(roots, d)
		}
	}
	if len(roots) == 0 {
		b.WriteString(indent + "└── no deliveries\n")
	}
	for i, d := range roots {
		writeDelivery(b, t, d, retries, indent, i == len(roots)-1)
	}
}

func writeDelivery(b *strings.Builder, t *traced, d deliveryv1.Delivery, retries map[string][]deliveryv1.Delivery, indent string, last bool) {
	branch, next := "├── ", indent+"│   "
	if last {
		branch, next = "└── ", indent+"    "
	}
	b.WriteString(indent + branch + deliveryLine(&d) + "\n")
	type child struct {
		line  string
		write func(indent string, last bool)
	}
	var children []child
	if d.Status.AttemptsOmitted > 0 {
		children = append(children, child{line: fmt.Sprintf("%d older attempts not shown", d.Status.AttemptsOmitted)})
	}
	for _, a := range d.Status.Attempts {
		children = append(children, child{line: attemptLine(a)})
	}
	for _, r := range retries[d.Name] {
		children = append(children, child{write: func(indent string, last bool) {
			writeDelivery(b, t, r, retries, indent, last)
		}})
	}
	if r := d.Status.ReplacedBy; r != nil && r.Event != "" && r.Event != d.Spec.Event {
		sub := t.reissues[r.Event]
		children = append(children, child{write: func(indent string, last bool) {
			branch, next := "├── ", indent+"│   "
			if last {
				branch, next = "└── ", indent+"    "
			}
			b.WriteString(indent + branch + "reissued as ")
			if sub == nil {
				b.WriteString("webhookevent/" + r.Event + " (not followed)\n")
				return
			}
			writeTrace(b, sub, next)
		}})
	}
	for i, c := range children {
		isLast := i == len(children)-1
		if c.write != nil {
			c.write(next, isLast)
			continue
		}
		br := "├── "
		if isLast {
			br = "└── "
		}
		b.WriteString(next + br + c.line + "\n")
	}
}
