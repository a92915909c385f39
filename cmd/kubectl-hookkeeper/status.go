package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func (p *plugin) statusCommand() *cobra.Command {
	var allNamespaces, noHeaders bool
	var out *outputFlags
	cmd := &cobra.Command{
		Use:   "status [-A]",
		Short: "Endpoints that are not Ready or Healthy, have an open circuit breaker or exhausted deliveries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := p.open(out)
			if err != nil {
				return err
			}
			if allNamespaces {
				s.ns = ""
			}
			var list hookv1.WebhookEndpointList
			if err := s.c.List(cmd.Context(), &list, client.InNamespace(s.ns)); err != nil {
				return fmt.Errorf("listing WebhookEndpoints: %w", err)
			}
			attention := needAttention(list.Items)
			if s.pr != nil {
				objs := make([]client.Object, len(attention))
				for i := range attention {
					objs[i] = &attention[i].endpoint
				}
				return p.printList(s.pr, objs, p.streams.Out)
			}
			return printStatus(p.streams.Out, attention, printers.PrintOptions{Wide: out.isWide(), NoHeaders: noHeaders})
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Across all namespaces.")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "Print the table without its header line.")
	out = addOutputFlags(cmd, true)
	return cmd
}

// attention is an endpoint that needs it, and why.
type attention struct {
	endpoint hookv1.WebhookEndpoint
	ready    *metav1.Condition
	healthy  *metav1.Condition
	// reason and message are those of the condition that is the first
	// cause: not Ready, else an open circuit breaker (reason CircuitOpen),
	// else not Healthy, else unresolved deliveries.
	reason, message string
}

// needAttention keeps the endpoints that are not Ready, have an open
// circuit breaker, are not Healthy, or have unresolved exhausted
// deliveries, in their order.
func needAttention(eps []hookv1.WebhookEndpoint) []attention {
	var out []attention
	for i := range eps {
		ep := eps[i]
		a := attention{
			endpoint: ep,
			ready:    meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionReady),
			healthy:  meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionHealthy),
		}
		isReady := a.ready != nil && a.ready.Status == metav1.ConditionTrue
		isHealthy := a.healthy == nil || a.healthy.Status != metav1.ConditionFalse
		circuit := meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionCircuitOpen)
		isOpen := circuit != nil && circuit.Status == metav1.ConditionTrue
		exhausted := ep.Status.Deliveries.ExhaustedUnresolved
		switch {
		case isReady && isHealthy && !isOpen && exhausted == 0:
			continue
		case !isReady && a.ready != nil:
			a.reason, a.message = a.ready.Reason, a.ready.Message
		case !isReady:
			a.reason, a.message = "NotReconciled", "the operator has not reconciled the endpoint yet"
		case isOpen:
			a.reason, a.message = hookv1.ConditionCircuitOpen, circuit.Message
		case !isHealthy:
			a.reason, a.message = a.healthy.Reason, a.healthy.Message
		default:
			a.reason = "UnresolvedDeliveries"
			if c := meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionDeliveriesExhausted); c != nil {
				a.message = c.Message
			}
		}
		out = append(out, a)
	}
	return out
}

// statusColumns are the status table's columns; -o wide adds those of
// priority 1.
var statusColumns = []metav1.TableColumnDefinition{
	{Name: "Namespace", Type: "string"},
	{Name: "Name", Type: "string", Format: "name"},
	{Name: "Ready", Type: "string"},
	{Name: "Healthy", Type: "string"},
	{Name: "Exhausted", Type: "integer"},
	{Name: "Reason", Type: "string"},
	{Name: "Pending", Type: "integer", Priority: 1},
	{Name: "Last Failure", Type: "string", Priority: 1},
	{Name: "Message", Type: "string", Priority: 1},
}

// printStatus is the status verb's own output: a table of the endpoints
// that need attention (cli-runtime's table printer, as kubectl get's), or
// a sentence when none does.
func printStatus(w io.Writer, as []attention, opts printers.PrintOptions) error {
	if len(as) == 0 {
		_, err := fmt.Fprint(w, "every endpoint is Ready and Healthy, with no exhausted deliveries\n")
		return err
	}
	table := &metav1.Table{ColumnDefinitions: statusColumns}
	for _, a := range as {
		ep := &a.endpoint
		table.Rows = append(table.Rows, metav1.TableRow{Cells: []any{
			ep.Namespace, ep.Name, condStatus(a.ready), condStatus(a.healthy), ep.Status.Deliveries.ExhaustedUnresolved, a.reason,
			ep.Status.Deliveries.Pending, orDash(ep.Status.LastFailureReason), orDash(a.message),
		}})
	}
	return printers.NewTablePrinter(opts).PrintObj(table, w)
}

func condStatus(c *metav1.Condition) string {
	if c == nil {
		return "Unknown"
	}
	return string(c.Status)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
