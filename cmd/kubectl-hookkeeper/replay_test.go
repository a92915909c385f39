package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func TestPointInTime(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	now := time.Date(2026, 12, 1, 12, 30, 15, 500, zone)
	for _, c := range []struct {
		in   string
		want time.Time
		err  string
	}{
		{in: "09:00", want: time.Date(2026, 12, 1, 9, 0, 0, 0, zone)},
		{in: "9:05", want: time.Date(2026, 12, 1, 9, 5, 0, 0, zone)},
		{in: "2h", want: time.Date(2026, 12, 1, 10, 30, 15, 0, zone)},
		{in: "2026-11-30T22:00:00Z", want: time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)},
		{in: "13:00", err: "in the future"},
		{in: "-2h", err: "must be positive"},
		{in: "2026-12-02T00:00:00Z", err: "in the future"},
		{in: "yesterday", err: "not a time of day"},
		{in: "24:00", err: "not a time of day"},
	} {
		got, err := pointInTime(c.in, now)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("pointInTime(%q) error %v, want %q", c.in, err, c.err)
		case c.err == "" && (err != nil || !got.Equal(c.want)):
			t.Errorf("pointInTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestReplaySpec(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	spec, err := replaySpec("billing", "09:00", "", []string{"order.*", " invoice.paid"}, "Reissue", 500, now)
	if err != nil {
		t.Fatal(err)
	}
	rp := spec.Replay
	if spec.EndpointRef.Name != "billing" || spec.Action != hookv1.RecoveryModeReplay || *spec.Limit != 500 || spec.Selector != nil ||
		!rp.Since.Time.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) || rp.Until != nil ||
		len(rp.EventTypes) != 2 || rp.EventTypes[1] != "invoice.paid" || rp.OnUnreplayable != hookv1.ReplayFallbackReissue {
		t.Errorf("spec %+v, replay %+v", spec, rp)
	}
	spec, err = replaySpec("billing", "3h", "1h", []string{"*"}, "Refuse", 0, now)
	if err != nil || spec.Limit != nil || !spec.Replay.Until.Time.Equal(now.Add(-time.Hour)) {
		t.Errorf("with --until: %+v, %v", spec, err)
	}
	for _, c := range []struct {
		since, until, fallback string
		types                  []string
		limit                  int
		want                   string
	}{
		{"", "", "Refuse", []string{"*"}, 0, "--since is required"},
		{"09:00", "", "Refuse", nil, 0, "--types is required"},
		{"later", "", "Refuse", []string{"*"}, 0, `--since "later"`},
		{"1h", "2h", "Refuse", []string{"*"}, 0, "must be later than --since"},
		{"1h", "", "Auto", []string{"*"}, 0, `--on-unreplayable "Auto": must be Refuse or Reissue`},
		{"1h", "", "Refuse", []string{"*"}, -1, "--limit -1: must be positive"},
	} {
		if _, err := replaySpec("billing", c.since, c.until, c.types, c.fallback, c.limit, now); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		}
	}
}

// TestReplayAgainstTheAPIServer: replay creates a DeliveryRecovery the real
// API server admits (its CEL rules included) and follows it: the test plays
// the recovery controller, and the progress names replayed and skipped
// items.
func TestReplayAgainstTheAPIServer(t *testing.T) {
	startCluster(t)
	const ns = "plugin-replay"
	namespaceWith(t, ns, "billing")
	w, err := cluster.admin.Watch(t.Context(), &hookv1.DeliveryRecoveryList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.stdout, r.stderr, r.err = runPlugin(t, "replay", "billing", "--since", "2h", "--types", "order.*,invoice.paid",
			"--on-unreplayable", "Reissue", "--timeout", "50s", "-n", ns, "--kubeconfig", cluster.kubeconfig)
		done <- r
	}()
	var created *hookv1.DeliveryRecovery
	select {
	case ev := <-w.ResultChan():
		created = ev.Object.(*hookv1.DeliveryRecovery)
	case r := <-done:
		t.Fatalf("replay ended before creating a recovery: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	rp := created.Spec.Replay
	if created.Spec.Action != hookv1.RecoveryModeReplay || rp == nil || len(rp.EventTypes) != 2 || rp.OnUnreplayable != hookv1.ReplayFallbackReissue ||
		*created.Spec.Limit != 100 || !strings.HasPrefix(created.Name, "billing-") {
		t.Fatalf("created %+v", created)
	}
	created.Status.State = hookv1.RecoveryComplete
	created.Status.Counts = hookv1.RecoveryCounts{Matched: 3, Replayed: 2, Skipped: 1, Delivered: 2}
	created.Status.Conditions = []metav1.Condition{{Type: hookv1.ConditionComplete, Status: metav1.ConditionTrue, Reason: hookv1.ReasonAllItemsSettled,
		Message: "3 of 3 items settled", LastTransitionTime: metav1.Now()}}
	if err := cluster.admin.Status().Update(t.Context(), created); err != nil {
		t.Fatalf("completing the replay: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("replay: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stdout, "deliveryrecovery/"+created.Name+" created (endpoint billing, action Replay)") ||
		!strings.Contains(r.stdout, "Complete matched=3 replayed=2 reissued=0 awaitingReissue=0 refused=0 skipped=1 delivered=2 failedAgain=0: 3 of 3 items settled") {
		t.Errorf("replay printed:\n%s", r.stdout)
	}
}
