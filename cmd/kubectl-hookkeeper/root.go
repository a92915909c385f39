package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// plugin is what every verb shares: kubectl's connection flags, the
// streams and the scheme of the kinds the plugin reads and writes.
type plugin struct {
	streams genericiooptions.IOStreams
	config  *genericclioptions.ConfigFlags
	scheme  *runtime.Scheme
}

// newRootCommand is `kubectl hookkeeper` with its verbs. Errors are
// returned, not printed: main prints them once, as `error: ...`.
func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	p := newPlugin(streams)
	root := &cobra.Command{
		Use:   "kubectl-hookkeeper",
		Short: "Act on hookkeeper's webhook endpoints",
		Long: `kubectl hookkeeper: act on hookkeeper's webhook endpoints, through the Kubernetes
API with your kubeconfig and permissions only. kubectl's connection flags
(--kubeconfig, --context, -n, --as, --as-group, --token, --server, ...) work
as they do in kubectl.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl hookkeeper"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	p.config.AddFlags(root.PersistentFlags())
	root.AddCommand(p.statusCommand(), p.recoverCommand(), p.replayCommand(), p.rotateSecretCommand(), p.probeCommand(), p.sendTestCommand(), p.traceCommand(), p.catalogCommand())
	return root
}

func newPlugin(streams genericiooptions.IOStreams) *plugin {
	return &plugin{streams: streams, config: genericclioptions.NewConfigFlags(true), scheme: newScheme()}
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Registering known, fixed types cannot fail.
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, hookv1.AddToScheme, addDeliveryTypes} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// session is what a verb runs with: its printer (nil for its own text),
// a client and the namespace.
type session struct {
	pr printers.ResourcePrinter
	c  client.Client
	ns string
}

// open checks -o (out may be nil for a verb without it) before it
// connects, so that a bad format is refused before anything changes.
func (p *plugin) open(out *outputFlags) (*session, error) {
	s := &session{}
	var err error
	if out != nil {
		if s.pr, err = out.printer(); err != nil {
			return nil, err
		}
	}
	if s.c, s.ns, err = p.connect(); err != nil {
		return nil, err
	}
	return s, nil
}

// connect returns a client configured as restConfig says.
func (p *plugin) connect() (client.Client, string, error) {
	cfg, ns, err := p.restConfig()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: p.scheme})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to the API server: %w", err)
	}
	return c, ns, nil
}

// restConfig is the client configuration kubectl would use with the same
// flags and kubeconfig, and the namespace to act in: -n, else the
// context's, else default. Server warnings go to stderr, as kubectl's do.
func (p *plugin) restConfig() (*rest.Config, string, error) {
	cfg, err := p.config.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns, _, err := p.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("the kubeconfig's namespace: %w", err)
	}
	cfg.WarningHandler = rest.NewWarningWriter(p.streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
	return cfg, ns, nil
}

// exactlyOne refuses anything but one positional argument, naming it.
func exactlyOne(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s needs exactly one %s", cmd.Name(), what)
		}
		return nil
	}
}
