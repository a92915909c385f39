package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/hookkeeper/hookkeeper/internal/servingcert"
)

// servingCertOptions are the flags of the self-provisioned serving
// certificate (internal/servingcert): the Secret the manager keeps it in,
// the names it is for, its lifetimes, and the APIService whose caBundle
// trusts it.
type servingCertOptions struct {
	secret        string
	namespace     string
	services      string
	clusterDomain string
	apiService    string
	validity      time.Duration
	caValidity    time.Duration
	overlap       time.Duration
}

func (o *servingCertOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.secret, "serving-cert-secret", "", "Secret in which the manager keeps a CA and the serving certificate of the HTTP API and the aggregated API: created if absent, rotated before expiry, shared by every replica (docs/operations/certificates.md). Empty: no self-provisioned certificate (use --api-tls-cert-file).")
	fs.StringVar(&o.namespace, "serving-cert-namespace", "", "Namespace of --serving-cert-secret; empty means the manager's own (POD_NAMESPACE, else the ServiceAccount's namespace).")
	fs.StringVar(&o.services, "serving-cert-services", "hookkeeper-api,hookkeeper-delivery-api", "Comma-separated Services (in the namespace of --serving-cert-secret) the certificate is for: each as <name>.<namespace>.svc and <name>.<namespace>.svc.<cluster-domain>.")
	fs.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "The cluster's DNS domain, for the certificate's names.")
	fs.StringVar(&o.apiService, "serving-cert-apiservice", "", "APIService whose spec.caBundle the manager keeps equal to the CA bundle of --serving-cert-secret (such as v1alpha1.delivery.hookkeeper.dev); empty: none.")
	fs.DurationVar(&o.validity, "serving-cert-validity", 90*24*time.Hour, "Lifetime of a serving certificate; renewed when two thirds have passed.")
	fs.DurationVar(&o.caValidity, "serving-cert-ca-validity", 5*365*24*time.Hour, "Lifetime of a CA (at least three serving certificate lifetimes); a new CA joins the bundle when two thirds have passed.")
	fs.DurationVar(&o.overlap, "serving-cert-overlap", 10*time.Minute, "How long a new CA is trusted before it signs, and an old CA after the last certificate it signed was replaced: time for every replica and the API server to pick up a change.")
}

func (o *servingCertOptions) enabled() bool { return o.secret != "" }

// policy returns the rotation policy the flags describe, in namespace ns.
func (o *servingCertOptions) policy(ns string) (servingcert.Policy, error) {
	p := servingcert.Policy{CAValidity: o.caValidity, LeafValidity: o.validity, Overlap: o.overlap}
	for svc := range strings.SplitSeq(o.services, ",") {
		if svc = strings.TrimSpace(svc); svc == "" {
			continue
		}
		if strings.Contains(svc, ".") {
			return p, fmt.Errorf("--serving-cert-services: %q is not a Service name (no dots; the namespace is added)", svc)
		}
		p.DNSNames = append(p.DNSNames, svc+"."+ns+".svc", svc+"."+ns+".svc."+o.clusterDomain)
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("--serving-cert-*: %w", err)
	}
	return p, nil
}

// resolveNamespace returns the Secret's namespace.
func (o *servingCertOptions) resolveNamespace() (string, error) {
	if o.namespace != "" {
		return o.namespace, nil
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil || strings.TrimSpace(string(data)) == "" {
		return "", errors.New("--serving-cert-namespace is needed outside a pod (no POD_NAMESPACE and no ServiceAccount namespace file)")
	}
	return strings.TrimSpace(string(data)), nil
}

// setup builds the provisioner (and the caBundle syncer), which run on
// every replica for the life of the process (the data plane: they outlive
// the manager, issue #44), and returns the provisioner: the certificate
// source of the HTTP API (GetCertificate) and of the aggregated API server
// (it is a dynamiccertificates.CertKeyContentProvider); run, to start with
// the data plane; and ready, the readiness check that holds the replica
// out of its Services until it has a certificate to serve.
func (o *servingCertOptions) setup(cfg *rest.Config) (_ *servingcert.Provisioner, run []func(context.Context) error, ready healthz.Checker, _ error) {
	ns, err := o.resolveNamespace()
	if err != nil {
		return nil, nil, nil, err
	}
	policy, err := o.policy(ns)
	if err != nil {
		return nil, nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	log := ctrl.Log.WithName("serving-cert")
	prov, err := servingcert.New(servingcert.Options{Client: cs, Namespace: ns, SecretName: o.secret, Policy: policy, Log: log})
	if err != nil {
		return nil, nil, nil, err
	}
	run = append(run, prov.Start)
	if o.apiService != "" {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		syncer := &servingcert.CABundleSyncer{Client: dyn, Name: o.apiService, Source: prov, Log: log}
		run = append(run, syncer.Start)
	}
	ready = func(*http.Request) error {
		select {
		case <-prov.Loaded():
			return nil
		default:
			return fmt.Errorf("no serving certificate yet from the Secret %s/%s", ns, o.secret)
		}
	}
	log.Info("the serving certificate is self-provisioned", "secret", ns+"/"+o.secret, "dnsNames", policy.DNSNames, "apiService", o.apiService)
	return prov, run, ready, nil
}
