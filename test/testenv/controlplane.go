package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AggregatedOptions say what StartAggregated runs besides the front-proxied
// control plane.
type AggregatedOptions struct {
	// ShippedRoles runs kube-controllers and applies the shipped
	// ClusterRoles (ApplyShippedClusterRoles), so that users bound to the
	// built-in view, edit and admin roles get what the shipped roles
	// aggregate into them, as on a cluster. The aggregation itself is
	// asynchronous: a test waits for the rules it relies on.
	ShippedRoles bool
}

// Aggregated is a control plane as a cluster's is for the aggregated
// delivery API: kube-apiserver with the front-proxy (request-header) CA
// and the aggregator's client certificate (FrontProxy), and what the
// aggregated server needs to serve on loopback: a listener on 127.0.0.1 and
// a serving certificate on disk. The test builds the server on Listener,
// CertFile, KeyFile and Kubeconfig, hands its Start to Serve, and calls
// Register once it should be reached through kube-apiserver.
type Aggregated struct {
	Env *envtest.Environment
	// Config and Kubeconfig are a cluster-admin's, of kube-apiserver.
	Config     *rest.Config
	Kubeconfig string
	Kubectl    string
	// Dir holds the kubeconfig, the certificates and the logs.
	Dir string
	// FrontProxyCA signs the client certificate kube-apiserver's
	// aggregator presents (FrontProxyClientName): tests forge front-proxy
	// requests with it.
	FrontProxyCA *CA
	// ServingCA signed the serving certificate (the APIService's
	// caBundle); a test rotates the certificate by writing a new one of
	// this CA over CertFile and KeyFile.
	ServingCA         *CA
	CertFile, KeyFile string
	// Listener is where the aggregated server serves, Addr its address
	// (127.0.0.1:port, the route RegisterDeliveryAPI sets up).
	Listener net.Listener
	Addr     string
	// Controllers and ShippedRoles are set with AggregatedOptions.ShippedRoles.
	Controllers  *KubeControllers
	ShippedRoles []rbacv1.ClusterRole

	stopServer func() error
}

// StartAggregated starts the control plane configured for API aggregation,
// writing its files to dir, and prepares the aggregated server's listener
// and certificate. On error nothing is left running; otherwise Stop stops
// everything it started.
func StartAggregated(dir string, opts AggregatedOptions) (a *Aggregated, err error) {
	a = &Aggregated{Dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Stop())
		}
	}()
	if a.Kubectl, err = Kubectl(); err != nil {
		return nil, err
	}
	if a.Env, err = New(); err != nil {
		return nil, err
	}
	if a.FrontProxyCA, err = FrontProxy(a.Env, dir); err != nil {
		return nil, err
	}
	if a.Config, err = a.Env.Start(); err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	if a.Kubeconfig, err = Kubeconfig(a.Env, dir); err != nil {
		return nil, err
	}
	if a.ServingCA, err = NewCA("delivery-api-ca"); err != nil {
		return nil, err
	}
	if a.CertFile, a.KeyFile, err = a.ServingCA.IssueFiles(dir, "delivery-api", DeliveryAPIHost, 2, true); err != nil {
		return nil, fmt.Errorf("writing the aggregated API's certificate: %w", err)
	}
	if a.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	a.Addr = a.Listener.Addr().String()
	if opts.ShippedRoles {
		if a.Controllers, err = StartKubeControllers(a.Kubeconfig, dir); err != nil {
			return nil, err
		}
		if a.ShippedRoles, err = ApplyShippedClusterRoles(a.Kubectl, a.Kubeconfig); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Serve runs start (the aggregated server's, on Listener) until the
// returned stop, or Stop, cancels its context; stop reports what start
// returned. A test stops the server with stop, in a cleanup registered
// after those of what the server uses (its ledger), so that it stops
// first.
func (a *Aggregated) Serve(start func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- start(ctx) }()
	var once sync.Once
	var err error
	a.stopServer = func() error {
		once.Do(func() {
			cancel()
			if err = <-served; err != nil {
				err = fmt.Errorf("the aggregated server: %w", err)
			}
		})
		return err
	}
	return a.stopServer
}

// Register routes the aggregated API through kube-apiserver
// (RegisterDeliveryAPI) and waits until kube-apiserver reports it
// Available, for at most timeout. Call it once Serve runs.
func (a *Aggregated) Register(timeout time.Duration) error {
	if err := RegisterDeliveryAPI(a.Kubectl, a.Kubeconfig, a.Addr, a.ServingCA.PEM); err != nil {
		return err
	}
	return WaitDeliveryAPI(a.Kubectl, a.Kubeconfig, timeout)
}

// Client is an HTTP client of the aggregated server that trusts its
// certificate and presents user's client certificate, when user has one
// (a user of Env.AddUser); nil user presents none.
func (a *Aggregated) Client(user *rest.Config) (*http.Client, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(a.ServingCA.PEM)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if user != nil && len(user.CertData) > 0 {
		pair, err := tls.X509KeyPair(user.CertData, user.KeyData)
		if err != nil {
			return nil, fmt.Errorf("the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// URL is the aggregated server's base URL.
func (a *Aggregated) URL() string { return "https://" + a.Addr }

// Stop stops the server, kube-controllers and the control plane, in that
// order, and reports how the server and kube-controllers ended.
func (a *Aggregated) Stop() error {
	var errs []error
	if a.stopServer != nil {
		if err := a.stopServer(); err != nil {
			errs = append(errs, err)
		}
	} else if a.Listener != nil {
		_ = a.Listener.Close() // never served: nothing else closes it
	}
	if err := a.Controllers.Stop(); err != nil {
		errs = append(errs, err)
	}
	a.Controllers = nil
	if a.Env != nil && a.Config != nil {
		// How etcd and kube-apiserver exit is not what a test checks.
		_ = a.Env.Stop()
	}
	return errors.Join(errs...)
}
