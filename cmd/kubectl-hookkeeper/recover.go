package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func (p *plugin) recoverCommand() *cobra.Command {
	var (
		action, eventType string
		since, timeout    time.Duration
		limit             int
		out               *outputFlags
	)
	cmd := &cobra.Command{
		Use:   "recover ENDPOINT --action Auto|Retry|Reissue|Dismiss",
		Short: "Create a DeliveryRecovery and follow it to Complete or Failed",
		Long: `Create a DeliveryRecovery of ENDPOINT's unresolved exhausted deliveries and
print each change of its counts until it is Complete (exit 0) or Failed
(exit 1). With -o, print the recovery as it ended instead.`,
		Args: exactlyOne("ENDPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := recoverySpec(args[0], action, since, eventType, limit, time.Now())
			if err != nil {
				return err
			}
			if err := positiveTimeout(timeout); err != nil {
				return err
			}
			s, err := p.open(out)
			if err != nil {
				return err
			}
			return p.recoverEndpoint(cmd.Context(), s, spec, timeout, 500*time.Millisecond)
		},
	}
	cmd.Flags().StringVar(&action, "action", "", "Auto, Retry, Reissue or Dismiss.")
	cmd.Flags().DurationVar(&since, "since", 0, "Only deliveries exhausted within this long.")
	cmd.Flags().StringVar(&eventType, "event-type", "", "Only events of this type (or prefix.*).")
	cmd.Flags().IntVar(&limit, "limit", 0, "At most this many deliveries (default: the API's).")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "How long to follow the recovery.")
	out = addOutputFlags(cmd, false)
	return cmd
}

// recoverySpec builds the DeliveryRecovery the recover verb creates,
// refusing flags the API would refuse, with the flag named.
func recoverySpec(endpoint, action string, since time.Duration, eventType string, limit int, now time.Time) (hookv1.DeliveryRecoverySpec, error) {
	spec := hookv1.DeliveryRecoverySpec{EndpointRef: hookv1.LocalObjectReference{Name: endpoint}, Action: hookv1.RecoveryMode(action)}
	switch spec.Action {
	case "Auto", "Retry", "Reissue", "Dismiss":
	case "":
		return spec, errors.New("--action is required: Auto, Retry, Reissue or Dismiss")
	default:
		return spec, fmt.Errorf("--action %q: must be Auto, Retry, Reissue or Dismiss", action)
	}
	if since < 0 {
		return spec, fmt.Errorf("--since %s: must be positive", since)
	}
	if limit < 0 {
		return spec, fmt.Errorf("--limit %d: must be positive", limit)
	}
	if since > 0 || eventType != "" {
		spec.Selector = &hookv1.DeliverySelector{}
		if since > 0 {
			t := metav1.NewTime(now.Add(-since))
			spec.Selector.ExhaustedAfter = &t
		}
		if eventType != "" {
			spec.Selector.EventTypes = []hookv1.EventTypePattern{hookv1.EventTypePattern(eventType)}
		}
	}
	if limit > 0 {
		l := int32(limit)
		spec.Limit = &l
	}
	return spec, nil
}

// recoverEndpoint creates the recovery (a generated name) and follows it
// until it is Complete or Failed: it prints each change of its progress,
// or with a printer (-o) the recovery as it ended.
func (p *plugin) recoverEndpoint(ctx context.Context, s *session, spec hookv1.DeliveryRecoverySpec, timeout, poll time.Duration) error {
	c, ns, pr, out := s.c, s.ns, s.pr, p.streams.Out
	rec := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{GenerateName: spec.EndpointRef.Name + "-", Namespace: ns}, Spec: spec}
	if err := c.Create(ctx, rec); err != nil {
		return fmt.Errorf("creating the DeliveryRecovery: %w", err)
	}
	if pr == nil {
		fmt.Fprintf(out, "deliveryrecovery/%s created (endpoint %s, action %s)\n", rec.Name, spec.EndpointRef.Name, spec.Action)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rec), rec); err != nil {
			return fmt.Errorf("following deliveryrecovery/%s: %w", rec.Name, err)
		}
		if line := progressLine(rec); line != last && pr == nil {
			fmt.Fprintln(out, line)
			last = line
		}
		switch rec.Status.State {
		case hookv1.RecoveryComplete, hookv1.RecoveryFailed:
			if pr != nil {
				if err := p.printObject(pr, rec, out); err != nil {
					return err
				}
			}
			if rec.Status.State == hookv1.RecoveryFailed {
				return fmt.Errorf("deliveryrecovery/%s failed", rec.Name)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deliveryrecovery/%s is still %s after %s", rec.Name, rec.Status.State, timeout)
		case <-tick.C:
		}
	}
}

// positiveTimeout refuses a --timeout that is not positive.
func positiveTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", d)
	}
	return nil
}

// progressLine is one line of the recover verb's progress.
func progressLine(rec *hookv1.DeliveryRecovery) string {
	state := string(rec.Status.State)
	if state == "" {
		state = "Pending"
	}
	c := rec.Status.Counts
	msg := ""
	if cond := meta.FindStatusCondition(rec.Status.Conditions, hookv1.ConditionComplete); cond != nil {
		msg = ": " + cond.Message
	}
	if rec.Status.State == hookv1.RecoveryFailed {
		if cond := meta.FindStatusCondition(rec.Status.Conditions, hookv1.ConditionFailed); cond != nil {
			msg = ": " + cond.Message
		}
	}
	if rec.Spec.Action == hookv1.RecoveryModeReplay {
		return fmt.Sprintf("%s matched=%d replayed=%d reissued=%d awaitingReissue=%d refused=%d skipped=%d delivered=%d failedAgain=%d%s",
			state, c.Matched, c.Replayed, c.Reissued, c.AwaitingReissue, c.Refused, c.Skipped, c.Delivered, c.FailedAgain, msg)
	}
	return fmt.Sprintf("%s matched=%d retried=%d reissued=%d refused=%d dismissed=%d delivered=%d failedAgain=%d%s",
		state, c.Matched, c.Retried, c.Reissued, c.Refused, c.Dismissed, c.Delivered, c.FailedAgain, msg)
}
