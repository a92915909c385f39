package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/hookkeeper/hookkeeper/internal/deliveryapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// deliveryAPIOptions configure the aggregated API server
// (delivery.hookkeeper.dev: kubectl get deliveries), which runs on every
// replica beside the HTTP API.
type deliveryAPIOptions struct {
	addr, certFile, keyFile, kubeconfig string
	selfSigned                          bool
	// provisioned: the certificate of --serving-cert-secret (set from it,
	// not a flag of its own), the installer's choice.
	provisioned bool
}

func (o *deliveryAPIOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "aggregated-api-bind-address", "0", "Address the aggregated API (delivery.hookkeeper.dev, served to kube-apiserver through the APIService) binds to, such as :8443; \"0\" disables it.")
	fs.StringVar(&o.certFile, "aggregated-api-tls-cert-file", "", "PEM certificate (chain) the aggregated API serves, reloaded when it changes; with --aggregated-api-tls-key-file.")
	fs.StringVar(&o.keyFile, "aggregated-api-tls-key-file", "", "PEM private key of --aggregated-api-tls-cert-file.")
	fs.BoolVar(&o.selfSigned, "aggregated-api-self-signed", false, "Serve the aggregated API with a certificate for 127.0.0.1, ::1 and localhost generated at start (local development; its SHA-256 fingerprint is logged).")
	fs.StringVar(&o.kubeconfig, "aggregated-api-kubeconfig", "", "kubeconfig of the API server to which the aggregated API delegates authentication and authorization; empty: the manager's --kubeconfig or $KUBECONFIG, else the in-cluster config.")
}

func (o *deliveryAPIOptions) enabled() bool { return o.addr != "" && o.addr != "0" }

func (o *deliveryAPIOptions) validate() error {
	if !o.enabled() {
		return nil
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return errors.New("--aggregated-api-tls-cert-file and --aggregated-api-tls-key-file go together")
	}
	sources := 0
	for _, set := range []bool{o.certFile != "", o.selfSigned, o.provisioned} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return errors.New("the aggregated API needs exactly one certificate source: --serving-cert-secret, --aggregated-api-tls-cert-file and --aggregated-api-tls-key-file, or --aggregated-api-self-signed")
	}
	return nil
}

// delegationKubeconfig is the kubeconfig file the server's delegated
// authentication and authorization use ("" = in-cluster).
func (o *deliveryAPIOptions) delegationKubeconfig() string {
	if o.kubeconfig != "" {
		return o.kubeconfig
	}
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		return f.Value.String()
	}
	return os.Getenv("KUBECONFIG")
}

// cert returns the serving certificate source; provisioned is the
// self-provisioned certificate when --serving-cert-secret is set.
func (o *deliveryAPIOptions) cert(log logr.Logger, provisioned dynamiccertificates.CertKeyContentProvider) (dynamiccertificates.CertKeyContentProvider, error) {
	if o.provisioned {
		if provisioned == nil {
			return nil, errors.New("no self-provisioned certificate source (internal error)")
		}
		return provisioned, nil
	}
	if o.certFile != "" {
		return deliveryapi.FileCert(o.certFile, o.keyFile)
	}
	certPEM, keyPEM, c, err := selfSignedCertificate(selfSignedValidity)
	if err != nil {
		return nil, fmt.Errorf("generating a self-signed certificate for the aggregated API: %w", err)
	}
	sum := sha256.Sum256(c.Certificate[0])
	log.Info("serving the aggregated API with a self-signed certificate", "sha256", hex.EncodeToString(sum[:]))
	return dynamiccertificates.NewStaticCertKeyContent("delivery-api-self-signed", certPEM, keyPEM)
}

// deliveryAPIServer builds the aggregated API server as a Runnable for
// every replica.
// Creating a webhookevent publishes through publisher, the HTTP API's path.
func deliveryAPIServer(o deliveryAPIOptions, store ledger.Store, publisher deliveryapi.Publisher, provisioned dynamiccertificates.CertKeyContentProvider, log logr.Logger) (*deliveryapi.Server, error) {
	cert, err := o.cert(log, provisioned)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the aggregated API on %s: %w", o.addr, err)
	}
	srv, err := deliveryapi.New(deliveryapi.Config{Ledger: store, Listener: ln, Cert: cert, Kubeconfig: o.delegationKubeconfig(), Publisher: publisher})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	log.Info("serving the aggregated API", "address", ln.Addr().String())
	return srv, nil
}
