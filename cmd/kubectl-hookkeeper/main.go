// Command kubectl-hookkeeper is the kubectl plugin for the actions admins
// take on hookkeeper (`kubectl hookkeeper VERB`). It reads and writes
// through the Kubernetes API with the user's kubeconfig and permissions
// only:
//
//	kubectl hookkeeper status [-A]
//	kubectl hookkeeper recover ENDPOINT --action Auto|Retry|Reissue|Dismiss [--since 2h] [--event-type T]
//	kubectl hookkeeper rotate-secret ENDPOINT
//	kubectl hookkeeper send-test ENDPOINT [--timeout 2m]
//	kubectl hookkeeper trace EVENT
//
// send-test and trace use the aggregated API delivery.hookkeeper.dev
// (kubectl get deliveries): creating a webhookevent needs the
// event-publisher ClusterRole, reading deliveries the view role.
//
// Install with `go install github.com/hookkeeper/hookkeeper/cmd/kubectl-hookkeeper@latest`.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

const usage = `kubectl hookkeeper: act on hookkeeper's webhook endpoints.

  status [-A]                         endpoints that are not Ready or Healthy, or have exhausted deliveries
  recover ENDPOINT --action A         create a DeliveryRecovery and follow it to Complete or Failed
          [--since 2h] [--event-type T] [--limit N] [--timeout 30m]
  rotate-secret ENDPOINT              start a signing-secret rotation
  send-test ENDPOINT [--timeout 2m]   publish a hookkeeper.test event to ENDPOINT only and wait for its outcome
  trace EVENT                         an event's deliveries, their attempts and any retry or reissue, as a tree

Flags everywhere: --kubeconfig PATH, --context NAME, -n NAMESPACE.
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, usage)
		return nil
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "path of the kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "the kubeconfig context to use (default: its current context)")
	namespace := fs.String("n", "", "namespace (default: the kubeconfig context's)")
	fs.StringVar(namespace, "namespace", "", "namespace (default: the kubeconfig context's)")
	allNamespaces := fs.Bool("A", false, "status: across all namespaces")
	action := fs.String("action", "", "recover: Auto, Retry, Reissue or Dismiss")
	since := fs.Duration("since", 0, "recover: only deliveries exhausted within this long")
	eventType := fs.String("event-type", "", "recover: only events of this type (or prefix.*)")
	limit := fs.Int("limit", 0, "recover: at most this many deliveries (default: the API's)")
	timeout := fs.Duration("timeout", 0, "recover, send-test: how long to follow (default 30m for recover, 2m for send-test)")
	// Flags may follow the positional argument (kubectl style).
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}

	cfg, ns, err := loadKubeconfig(*kubeconfig, *kubeContext, *namespace)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := hookv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := addDeliveryTypes(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("connecting to the API server: %w", err)
	}

	one := func() (string, error) {
		if len(positional) != 1 {
			what := "ENDPOINT"
			if verb == "trace" {
				what = "EVENT"
			}
			return "", fmt.Errorf("%s needs exactly one %s", verb, what)
		}
		return positional[0], nil
	}
	follow := func(def time.Duration) time.Duration {
		if *timeout > 0 {
			return *timeout
		}
		return def
	}
	switch verb {
	case "status":
		if *allNamespaces {
			ns = ""
		}
		return status(ctx, c, ns, out)
	case "recover":
		ep, err := one()
		if err != nil {
			return err
		}
		spec, err := recoverySpec(ep, *action, *since, *eventType, *limit, time.Now())
		if err != nil {
			return err
		}
		return recoverEndpoint(ctx, c, ns, spec, follow(30*time.Minute), out)
	case "rotate-secret":
		ep, err := one()
		if err != nil {
			return err
		}
		return rotateSecret(ctx, c, ns, ep, out)
	case "send-test":
		ep, err := one()
		if err != nil {
			return err
		}
		return sendTest(ctx, c, ns, ep, follow(2*time.Minute), 500*time.Millisecond, out)
	case "trace":
		ev, err := one()
		if err != nil {
			return err
		}
		t, err := gatherTrace(ctx, c, ns, ev, 0)
		if err != nil {
			return err
		}
		fmt.Fprint(out, renderTrace(t))
		return nil
	}
	return fmt.Errorf("unknown verb %q (status, recover, rotate-secret, send-test, trace)", verb)
}

// status prints the endpoints that need attention, or says none does.
func status(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	var list hookv1.WebhookEndpointList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing WebhookEndpoints: %w", err)
	}
	fmt.Fprint(out, statusTable(list.Items))
	return nil
}

// statusTable is the status verb's output: one line per endpoint that is
// not Ready, not Healthy, or has unresolved exhausted deliveries.
func statusTable(eps []hookv1.WebhookEndpoint) string {
	rows := [][]string{{"NAMESPACE", "NAME", "READY", "HEALTHY", "EXHAUSTED", "REASON"}}
	for i := range eps {
		ep := &eps[i]
		ready := meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionReady)
		healthy := meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionHealthy)
		isReady := ready != nil && ready.Status == metav1.ConditionTrue
		isHealthy := healthy == nil || healthy.Status != metav1.ConditionFalse
		exhausted := ep.Status.Deliveries.ExhaustedUnresolved
		if isReady && isHealthy && exhausted == 0 {
			continue
		}
		reason := ""
		switch {
		case !isReady && ready != nil:
			reason = ready.Reason
		case !isReady:
			reason = "NotReconciled"
		case !isHealthy:
			reason = healthy.Reason
		default:
			reason = "UnresolvedDeliveries"
		}
		rows = append(rows, []string{ep.Namespace, ep.Name, condStatus(ready), condStatus(healthy), fmt.Sprint(exhausted), reason})
	}
	if len(rows) == 1 {
		return "every endpoint is Ready and Healthy, with no exhausted deliveries\n"
	}
	return table(rows)
}

func condStatus(c *metav1.Condition) string {
	if c == nil {
		return "Unknown"
	}
	return string(c.Status)
}

func table(rows [][]string) string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], len(cell))
		}
	}
	var s string
	for _, r := range rows {
		for i, cell := range r {
			if i == len(r)-1 {
				s += cell + "\n"
			} else {
				s += fmt.Sprintf("%-*s   ", widths[i], cell)
			}
		}
	}
	return s
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

// recoverEndpoint creates the recovery (a generated name) and prints each
// change of its progress until it is Complete or Failed.
func recoverEndpoint(ctx context.Context, c client.Client, ns string, spec hookv1.DeliveryRecoverySpec, timeout time.Duration, out io.Writer) error {
	rec := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{GenerateName: spec.EndpointRef.Name + "-", Namespace: ns}, Spec: spec}
	if err := c.Create(ctx, rec); err != nil {
		return fmt.Errorf("creating the DeliveryRecovery: %w", err)
	}
	fmt.Fprintf(out, "deliveryrecovery/%s created (endpoint %s, action %s)\n", rec.Name, spec.EndpointRef.Name, spec.Action)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rec), rec); err != nil {
			return fmt.Errorf("following deliveryrecovery/%s: %w", rec.Name, err)
		}
		if line := progressLine(rec); line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		switch rec.Status.State {
		case hookv1.RecoveryComplete:
			return nil
		case hookv1.RecoveryFailed:
			return fmt.Errorf("deliveryrecovery/%s failed", rec.Name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deliveryrecovery/%s is still %s after %s", rec.Name, rec.Status.State, timeout)
		case <-tick.C:
		}
	}
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
	return fmt.Sprintf("%s matched=%d retried=%d reissued=%d refused=%d dismissed=%d delivered=%d failedAgain=%d%s",
		state, c.Matched, c.Retried, c.Reissued, c.Refused, c.Dismissed, c.Delivered, c.FailedAgain, msg)
}

// rotateSecret starts a rotation the way docs/operations/rotating-signing-secrets.md describes: a
// generated Secret loses its key (the operator writes a new one); a
// referenced Secret gets a new whsec_ value. The previous secret stays
// valid for the endpoint's grace period. The new value is never printed.
func rotateSecret(ctx context.Context, c client.Client, ns, endpoint string, out io.Writer) error {
	var ep hookv1.WebhookEndpoint
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: endpoint}, &ep); err != nil {
		return fmt.Errorf("reading webhookendpoint/%s: %w", endpoint, err)
	}
	var secret corev1.Secret
	if ref := ep.Spec.SigningSecretRef; ref != nil {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &secret); err != nil {
			return fmt.Errorf("reading the referenced Secret %s: %w", ref.Name, err)
		}
		key := ref.Key
		if key == "" {
			key = "signingSecret"
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		patch := client.MergeFrom(secret.DeepCopy())
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[key] = []byte("whsec_" + base64.StdEncoding.EncodeToString(raw))
		if err := c.Patch(ctx, &secret, patch); err != nil {
			return fmt.Errorf("writing a new value into Secret %s key %s: %w", ref.Name, key, err)
		}
		fmt.Fprintf(out, "wrote a new signing secret into Secret %s (key %s); the previous one stays valid for the grace period\n", ref.Name, key)
		return nil
	}
	name := ep.Status.SigningSecretName
	if name == "" {
		return fmt.Errorf("webhookendpoint/%s has no generated signing Secret yet (status.signingSecretName is empty)", endpoint)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &secret); err != nil {
		return fmt.Errorf("reading the generated Secret %s: %w", name, err)
	}
	patch := client.MergeFrom(secret.DeepCopy())
	delete(secret.Data, "signingSecret")
	if err := c.Patch(ctx, &secret, patch); err != nil {
		return fmt.Errorf("removing the key of Secret %s: %w", name, err)
	}
	fmt.Fprintf(out, "removed the signing secret from Secret %s: the operator writes a new one; the previous one stays valid for the grace period\n", name)
	return nil
}

// loadKubeconfig reads the user's kubeconfig the way kubectl does, with
// kubectl's --kubeconfig, --context and --namespace: the namespace is the
// flag's, else the context's.
func loadKubeconfig(path, kubeContext, namespace string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if namespace == "" {
		if namespace, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("the kubeconfig's namespace: %w", err)
		}
	}
	return cfg, namespace, nil
}
