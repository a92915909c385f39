// Command kubectl-hookkeeper is the kubectl plugin for the actions admins
// take on hookkeeper (`kubectl hookkeeper VERB`). It reads and writes
// through the Kubernetes API with the user's kubeconfig and permissions
// only, and takes kubectl's own connection flags (k8s.io/cli-runtime's
// ConfigFlags: --kubeconfig, --context, -n, --as, --token, --server, ...)
// and its -o printers, so that it behaves as kubectl does:
//
//	kubectl hookkeeper status [-A] [-o wide|json|yaml|name|jsonpath=...]
//	kubectl hookkeeper recover ENDPOINT --action Auto|Retry|Reissue|Dismiss [--since 2h] [--event-type T] [-o ...]
//	kubectl hookkeeper rotate-secret ENDPOINT
//	kubectl hookkeeper send-test ENDPOINT [--timeout 2m] [-o ...]
//	kubectl hookkeeper trace EVENT [-o ...]
//	kubectl hookkeeper catalog [TYPE] [-A] [--examples] [-o table|json|yaml]
//
// send-test and trace use the aggregated API delivery.hookkeeper.dev
// (kubectl get deliveries): creating a webhookevent needs the
// event-publisher ClusterRole, reading deliveries the view role.
//
// Install with `go install github.com/hookkeeper/hookkeeper/cmd/kubectl-hookkeeper@latest`.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := run(context.Background(), os.Args[1:], streams); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run runs the plugin with args (without the program's name).
func run(ctx context.Context, args []string, streams genericiooptions.IOStreams) error {
	cmd := newRootCommand(streams)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}
