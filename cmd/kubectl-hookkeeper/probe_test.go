package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// TestProbePatch: the merge patch sets the annotation, and only it, to an
// RFC 3339 time the operator parses, with nanoseconds so that two requests
// in one second differ.
func TestProbePatch(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	value, patch, err := probePatch(now)
	if err != nil {
		t.Fatal(err)
	}
	if value != "2026-12-01T11:00:00.123456789Z" {
		t.Errorf("value %q", value)
	}
	if at, err := time.Parse(time.RFC3339, value); err != nil || !at.Equal(now) {
		t.Errorf("the value does not parse as RFC 3339: %v, %v", at, err)
	}
	if len(value) > 64 {
		t.Errorf("the value is longer than status.breaker.probeRequest's 64 characters: %d", len(value))
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"annotations": map[string]any{hookv1.AnnotationProbeRequestedAt: value}}}
	if !equalJSON(got, want) {
		t.Errorf("patch %s", patch)
	}
	if other, _, _ := probePatch(now.Add(time.Millisecond)); other == value {
		t.Errorf("two requests a millisecond apart have one value %q", value)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestStatusCircuitOpen: an open breaker needs attention, with reason
// CircuitOpen and the condition's message, ahead of Healthy=False.
func TestStatusCircuitOpen(t *testing.T) {
	eps := []hookv1.WebhookEndpoint{
		endpointWith("fine", metav1.ConditionTrue, metav1.ConditionTrue, "Reconciled", 0),
		endpointWith("down", metav1.ConditionTrue, metav1.ConditionFalse, "Reconciled", 2),
		endpointWith("closed", metav1.ConditionTrue, metav1.ConditionTrue, "Reconciled", 0),
	}
	eps[1].Status.Conditions = append(eps[1].Status.Conditions, metav1.Condition{Type: hookv1.ConditionCircuitOpen, Status: metav1.ConditionTrue, Reason: "Failing", Message: "the circuit breaker opened"})
	eps[2].Status.Conditions = append(eps[2].Status.Conditions, metav1.Condition{Type: hookv1.ConditionCircuitOpen, Status: metav1.ConditionFalse, Reason: "ProbeSucceeded"})
	want := "" +
		"NAMESPACE   NAME   READY   HEALTHY   EXHAUSTED   REASON        PENDING   LAST FAILURE   MESSAGE\n" +
		"shop        down   True    False     2           CircuitOpen   0         -              the circuit breaker opened\n"
	if got := statusText(t, eps, printers.PrintOptions{Wide: true}); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestProbe: against the real API server, probe writes the annotation with
// a merge patch, which `patch webhookendpoints` alone allows (what
// docs/operations/rbac.md documents); a user without it is refused by
// name and the endpoint is left as it was; an unknown endpoint is
// NotFound. With --wait it follows the endpoint until the operator (played
// by the test) recorded the request, and prints CircuitOpen.
func TestProbe(t *testing.T) {
	startCluster(t)
	const ns = "plugin-probe"
	namespaceWith(t, ns, "billing")
	plugin := func(args ...string) (string, error) {
		t.Helper()
		stdout, _, err := runPlugin(t, append(args, "-n", ns, "--kubeconfig", cluster.kubeconfig)...)
		return stdout, err
	}
	annotation := func() string {
		t.Helper()
		var ep hookv1.WebhookEndpoint
		if err := cluster.admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "billing"}, &ep); err != nil {
			t.Fatal(err)
		}
		return ep.Annotations[hookv1.AnnotationProbeRequestedAt]
	}

	before := time.Now()
	stdout, err := plugin("probe", "billing")
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	first := annotation()
	at, err := time.Parse(time.RFC3339, first)
	if err != nil || at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Fatalf("annotation %q: %v, want the time of the request", first, err)
	}
	if want := "webhookendpoint/billing: probe requested (" + hookv1.AnnotationProbeRequestedAt + "=" + first + "); the operator has not shown its circuit breaker yet\n"; stdout != want {
		t.Errorf("probe printed %q, want %q", stdout, want)
	}

	if _, err := plugin("probe", "nowhere"); !apierrors.IsNotFound(err) {
		t.Errorf("probe of an unknown endpoint: %v, want NotFound", err)
	}

	as := []string{"--as", "alice"}
	if _, err := plugin(append([]string{"probe", "billing"}, as...)...); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `User "alice" cannot patch resource "webhookendpoints"`) {
		t.Errorf("probe as alice, who may not patch: %v, want a Forbidden naming alice and patch", err)
	}
	if got := annotation(); got != first {
		t.Errorf("a refused probe changed the annotation to %q", got)
	}
	create(t,
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe-endpoints"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{hookv1.GroupVersion.Group}, Resources: []string{"webhookendpoints"}, Verbs: []string{"patch"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe-endpoints"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "probe-endpoints"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		})
	eventually(t, "probe as alice with patch", func() error {
		_, err := plugin(append([]string{"probe", "billing"}, as...)...)
		return err
	})
	second := annotation()
	if second == first {
		t.Errorf("a second request kept the first's value %q", first)
	}

	// --wait: the test plays the operator, which records the request and
	// writes CircuitOpen.
	w, err := cluster.admin.Watch(t.Context(), &hookv1.WebhookEndpointList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type result struct {
		stdout string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		out, err := plugin("probe", "billing", "--wait", "--timeout", "50s")
		done <- result{out, err}
	}()
	var requested string
	for requested == "" || requested == second {
		select {
		case ev := <-w.ResultChan():
			if ep, ok := ev.Object.(*hookv1.WebhookEndpoint); ok {
				requested = ep.Annotations[hookv1.AnnotationProbeRequestedAt]
			}
		case r := <-done:
			t.Fatalf("probe --wait ended before the operator acted: %v\n%s", r.err, r.stdout)
		}
	}
	var ep hookv1.WebhookEndpoint
	if err := cluster.admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "billing"}, &ep); err != nil {
		t.Fatal(err)
	}
	ep.Status.Breaker = &hookv1.CircuitBreakerStatus{State: hookv1.CircuitOpen, Reason: "Failing", Openings: 1, ProbeRequest: requested}
	ep.Status.Conditions = []metav1.Condition{{Type: hookv1.ConditionCircuitOpen, Status: metav1.ConditionTrue, Reason: "Failing",
		Message: "the next probe is due now", LastTransitionTime: metav1.Now()}}
	if err := cluster.admin.Status().Update(t.Context(), &ep); err != nil {
		t.Fatalf("recording the request as the operator: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("probe --wait: %v", r.err)
	}
	if want := "webhookendpoint/billing: the operator acted on the probe request; CircuitOpen=True (Failing): the next probe is due now\n"; r.stdout != want {
		t.Errorf("probe --wait printed %q, want %q", r.stdout, want)
	}

	// Without --wait, the state the status showed, as the patch returned it.
	stdout, err = plugin("probe", "billing")
	if err != nil || !strings.HasSuffix(stdout, "; its circuit breaker was Open (Failing)\n") {
		t.Errorf("probe of an open breaker: %v, %q", err, stdout)
	}
	// -o name prints the endpoint.
	if stdout, err = plugin("probe", "billing", "-o", "name"); err != nil || stdout != "webhookendpoint.hookkeeper.dev/billing\n" {
		t.Errorf("probe -o name: %v, %q", err, stdout)
	}
}
