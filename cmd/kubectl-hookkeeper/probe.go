package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func (p *plugin) probeCommand() *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
		out     *outputFlags
	)
	cmd := &cobra.Command{
		Use:   "probe ENDPOINT [--wait]",
		Short: "Ask for a probe of an endpoint's open circuit breaker now",
		Long: `Ask for a probe of ENDPOINT's open circuit breaker now, instead of at its next
probe (or, after a 410 Gone, instead of never): the annotation
` + hookv1.AnnotationProbeRequestedAt + ` gets the current time, with a merge patch
(RBAC: patch webhookendpoints). The operator acts on each value once and
records it in status.breaker.probeRequest, so re-applying a manifest that
carries the annotation asks for nothing. With --wait, wait until the operator
has acted on it (RBAC: get webhookendpoints too) and print the CircuitOpen
condition. With -o, print the endpoint (after --wait, as the operator left it).`,
		Args: exactlyOne("ENDPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := positiveTimeout(timeout); err != nil {
				return err
			}
			s, err := p.open(out)
			if err != nil {
				return err
			}
			return p.probeEndpoint(cmd.Context(), s, args[0], time.Now(), wait, timeout, 250*time.Millisecond)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "Wait until the operator has acted on the request, and print the CircuitOpen condition.")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "How long --wait waits.")
	out = addOutputFlags(cmd, false)
	return cmd
}

// probePatch is the merge patch that asks for a probe at now, and the
// annotation's value: RFC 3339 with nanoseconds, so that two requests in
// one second are two requests.
func probePatch(now time.Time) (string, []byte, error) {
	v := now.UTC().Format(time.RFC3339Nano)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{hookv1.AnnotationProbeRequestedAt: v}}})
	return v, patch, err
}

// probeEndpoint writes the probe request and, with wait, follows the
// endpoint until the operator recorded it in status.breaker.probeRequest.
func (p *plugin) probeEndpoint(ctx context.Context, s *session, name string, now time.Time, wait bool, timeout, poll time.Duration) error {
	value, patch, err := probePatch(now)
	if err != nil {
		return err
	}
	ep := &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}
	if err := s.c.Patch(ctx, ep, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("asking for a probe of webhookendpoint/%s: %w", name, err)
	}
	if !wait {
		if s.pr != nil {
			return p.printObject(s.pr, ep, p.streams.Out)
		}
		return printProbeRequested(p.streams.Out, ep, value)
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if b := ep.Status.Breaker; b != nil && b.ProbeRequest == value {
			if s.pr != nil {
				return p.printObject(s.pr, ep, p.streams.Out)
			}
			return printProbeActed(p.streams.Out, ep)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhookendpoint/%s: the operator has not acted on the probe request (%s) after %s: is it running?", name, value, timeout)
		case <-tick.C:
		}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(ep), ep); err != nil {
			return fmt.Errorf("following webhookendpoint/%s: %w", name, err)
		}
	}
}

// printProbeRequested says what was asked and what the status showed when
// it was asked.
func printProbeRequested(w io.Writer, ep *hookv1.WebhookEndpoint, value string) error {
	state := "the operator has not shown its circuit breaker yet"
	if b := ep.Status.Breaker; b != nil {
		state = "its circuit breaker was " + string(b.State)
		if b.State == hookv1.CircuitOpen && b.Reason != "" {
			state += " (" + b.Reason + ")"
		}
		if b.State != hookv1.CircuitOpen {
			state += ": there is nothing to probe while it is closed"
		}
	}
	_, err := fmt.Fprintf(w, "webhookendpoint/%s: probe requested (%s=%s); %s\n", ep.Name, hookv1.AnnotationProbeRequestedAt, value, state)
	return err
}

// printProbeActed prints the CircuitOpen condition after the operator
// acted on the request.
func printProbeActed(w io.Writer, ep *hookv1.WebhookEndpoint) error {
	line := fmt.Sprintf("webhookendpoint/%s: the operator acted on the probe request", ep.Name)
	if c := meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionCircuitOpen); c != nil {
		line += fmt.Sprintf("; CircuitOpen=%s (%s): %s", c.Status, c.Reason, c.Message)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
