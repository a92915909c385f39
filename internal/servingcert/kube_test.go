package servingcert_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hookkeeper/hookkeeper/internal/servingcert"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

const (
	namespace  = "hookkeeper-system"
	secretName = "hookkeeper-serving-cert"
	dnsName    = "hookkeeper-api.hookkeeper-system.svc"
	apiService = "v1alpha1.delivery.hookkeeper.dev"
)

var policy = servingcert.Policy{
	CAValidity: 9 * time.Hour, LeafValidity: 3 * time.Hour, Overlap: time.Hour,
	DNSNames: []string{dnsName, dnsName + ".cluster.local"},
}

// controlPlane starts the real kube-apiserver with the manager's namespace.
func controlPlane(t *testing.T) *rest.Config {
	t.Helper()
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// replica is one manager's provisioner and the HTTPS servers it serves:
// srv through GetCertificate (as the HTTP API), agg through
// k8s.io/apiserver's DynamicServingCertificateController fed by the
// provisioner as a CertKeyContentProvider (as the aggregated API server).
type replica struct {
	p        *servingcert.Provisioner
	srv, agg *httptest.Server
}

func startReplica(t *testing.T, ctx context.Context, cfg *rest.Config, clk *clocktesting.FakeClock, name string) replica {
	t.Helper()
	opts := servingcert.Options{
		Client: kubernetes.NewForConfigOrDie(cfg), Namespace: namespace, SecretName: secretName,
		Policy: policy, Log: testr.New(t).WithName(name),
	}
	if clk != nil {
		opts.Clock = clk
	}
	p, err := servingcert.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name) }))
	srv.TLS = &tls.Config{GetCertificate: p.GetCertificate, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	certCtl := dynamiccertificates.NewDynamicServingCertificateController(&tls.Config{MinVersion: tls.VersionTLS12}, nil, p, nil, nil)
	p.AddListener(certCtl)
	go certCtl.Run(1, ctx.Done())
	agg := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name) }))
	agg.TLS = &tls.Config{GetConfigForClient: certCtl.GetConfigForClient}
	agg.StartTLS()
	t.Cleanup(agg.Close)
	return replica{p: p, srv: srv, agg: agg}
}

// servedCertificate connects to url trusting only bundle, verifying at the
// time now gives, and returns the certificate the server presented.
func servedCertificate(url string, bundle []byte, now func() time.Time) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, fmt.Errorf("the bundle holds no certificate")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, // every request a new handshake
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: dnsName, Time: now},
	}}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return resp.TLS.PeerCertificates[0], nil
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond) // polling, not synchronization
	}
}

// TestReplicasAgreeOnOneCertificate starts three provisioners at once on a
// cluster without the Secret: one Secret results, made by the manager, and
// every replica serves its certificate, trusted by its bundle.
func TestReplicasAgreeOnOneCertificate(t *testing.T) {
	cfg := controlPlane(t)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	var replicas []replica
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 3 {
		wg.Go(func() {
			r := startReplica(t, ctx, cfg, nil, fmt.Sprintf("replica-%d", i))
			mu.Lock()
			replicas = append(replicas, r)
			mu.Unlock()
		})
	}
	wg.Wait()

	cs := kubernetes.NewForConfigOrDie(cfg)
	var secret *corev1.Secret
	eventually(t, "every replica serves the Secret's certificate", func() error {
		var err error
		secret, err = cs.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, r := range replicas {
			cert, _ := r.p.CurrentCertKeyContent()
			if string(cert) != string(secret.Data[servingcert.KeyCert]) {
				return fmt.Errorf("replica %d serves another certificate than the Secret's", i)
			}
		}
		return nil
	})
	if secret.Type != corev1.SecretTypeTLS || secret.Labels["app.kubernetes.io/managed-by"] != "hookkeeper-servingcert" {
		t.Errorf("the Secret has type %q and labels %v", secret.Type, secret.Labels)
	}
	list, err := cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d Secrets in %s, want 1", len(list.Items), namespace)
	}
	block, _ := pem.Decode(secret.Data[servingcert.KeyCert])
	for i, r := range replicas {
		cert, err := servedCertificate(r.srv.URL, secret.Data[servingcert.KeyCABundle], time.Now)
		if err != nil {
			t.Fatalf("replica %d over TLS trusting the Secret's bundle: %v", i, err)
		}
		if string(cert.Raw) != string(block.Bytes) {
			t.Errorf("replica %d presented another certificate than the Secret's", i)
		}
	}
}

// TestRotationWithoutRestart runs a provisioner and the APIService caBundle
// syncer on a fake clock through a certificate rotation, a CA rollover and
// the old CA's retirement. At every stage a client that trusts the
// APIService's caBundle (as kube-apiserver does) connects to the same,
// never restarted servers (net/http's GetCertificate, and k8s.io/apiserver's
// dynamic serving controller as the aggregated API server uses it) and
// gets the newest certificate from both.
func TestRotationWithoutRestart(t *testing.T) {
	cfg := controlPlane(t)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	dyn := dynamic.NewForConfigOrDie(cfg)
	apiSvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": apiService},
		"spec": map[string]any{
			"group": "delivery.hookkeeper.dev", "version": "v1alpha1",
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(100),
			"service": map[string]any{"namespace": namespace, "name": "hookkeeper-api", "port": int64(443)},
		},
	}}
	if _, err := dyn.Resource(servingcert.APIServiceResource).Create(ctx, apiSvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	clk := clocktesting.NewFakeClock(time.Now())
	r := startReplica(t, ctx, cfg, clk, "replica")
	syncer := &servingcert.CABundleSyncer{Client: dyn, Name: apiService, Source: r.p, Log: testr.New(t).WithName("syncer")}
	done := make(chan error, 1)
	go func() { done <- syncer.Start(ctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	caBundle := func() ([]byte, error) {
		obj, err := dyn.Resource(servingcert.APIServiceResource).Get(ctx, apiService, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		s, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle")
		return base64Decode(s)
	}
	// stage waits until the APIService's caBundle is the provisioner's and
	// holds cas CAs, and the server presents a certificate that the
	// caBundle trusts and that satisfies want.
	stage := func(name string, cas int, want func(*x509.Certificate) error) *x509.Certificate {
		t.Helper()
		var served *x509.Certificate
		eventually(t, name, func() error {
			bundle, err := caBundle()
			if err != nil {
				return err
			}
			if string(bundle) != string(r.p.CurrentCABundleContent()) {
				return fmt.Errorf("the APIService's caBundle is not the served bundle")
			}
			if n := countCerts(bundle); n != cas {
				return fmt.Errorf("the caBundle holds %d CAs, want %d", n, cas)
			}
			served, err = servedCertificate(r.srv.URL, bundle, clk.Now)
			if err != nil {
				return fmt.Errorf("a client trusting the APIService's caBundle: %w", err)
			}
			aggServed, err := servedCertificate(r.agg.URL, bundle, clk.Now)
			if err != nil {
				return fmt.Errorf("the apiserver-served twin, to a client trusting the APIService's caBundle: %w", err)
			}
			if !aggServed.Equal(served) {
				return fmt.Errorf("the apiserver-served twin presents another certificate")
			}
			return want(served)
		})
		return served
	}
	anyCert := func(*x509.Certificate) error { return nil }

	first := stage("first certificate", 1, anyCert)
	// Two thirds through the certificate's 3h: a new one from the same CA.
	clk.Step(2*time.Hour + time.Minute)
	stage("certificate rotated", 1, func(c *x509.Certificate) error {
		if c.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return fmt.Errorf("still the first certificate")
		}
		return c.CheckSignatureFrom(mustIssuer(t, first, r.p))
	})
	// Two thirds through the CA's 9h: a second CA joins the bundle, the
	// first still signs.
	clk.Step(4 * time.Hour)
	beforeRollover := stage("a new CA joins the bundle", 2, anyCert)
	// After the overlap the new CA signs; the old one stays an overlap more.
	clk.Step(time.Hour + time.Minute)
	stage("the new CA signs", 2, func(c *x509.Certificate) error {
		if string(c.RawIssuer) == string(beforeRollover.RawIssuer) {
			return fmt.Errorf("still signed by the old CA")
		}
		return nil
	})
	clk.Step(time.Hour + time.Minute)
	stage("the old CA retired", 1, anyCert)
}

func mustIssuer(t *testing.T, leaf *x509.Certificate, p *servingcert.Provisioner) *x509.Certificate {
	t.Helper()
	bundle := p.CurrentCABundleContent()
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			t.Fatal("no CA in the bundle signed the certificate")
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err == nil && leaf.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
}

func countCerts(bundle []byte) int {
	n := 0
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return n
		}
		n++
	}
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// TestReplicasReloadAnotherReplicasRotation: a replica whose own clock
// says nothing is due still serves, without restart, the certificate that
// another replica rotated: it watches the Secret.
func TestReplicasReloadAnotherReplicasRotation(t *testing.T) {
	cfg := controlPlane(t)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	start := time.Now()
	clkA, clkB := clocktesting.NewFakeClock(start), clocktesting.NewFakeClock(start)
	a := startReplica(t, ctx, cfg, clkA, "replica-a")
	b := startReplica(t, ctx, cfg, clkB, "replica-b")

	servedBy := func(r replica) (*x509.Certificate, error) {
		return servedCertificate(r.srv.URL, r.p.CurrentCABundleContent(), clkA.Now)
	}
	// bothServe returns the certificate both replicas serve.
	bothServe := func() (*x509.Certificate, error) {
		ca, err := servedBy(a)
		if err != nil {
			return nil, err
		}
		cb, err := servedBy(b)
		if err != nil {
			return nil, err
		}
		if ca.SerialNumber.Cmp(cb.SerialNumber) != 0 {
			return nil, fmt.Errorf("replicas serve different certificates")
		}
		return ca, nil
	}
	var first *x509.Certificate
	eventually(t, "both replicas serve one certificate", func() error {
		var err error
		first, err = bothServe()
		return err
	})
	clkA.Step(2*time.Hour + time.Minute) // only replica A sees the certificate due
	eventually(t, "replica B serves the certificate replica A rotated", func() error {
		c, err := bothServe()
		if err != nil {
			return err
		}
		if c.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return fmt.Errorf("replica A has not rotated")
		}
		return nil
	})
}

// TestSecretOwnership: a deleted Secret is made again and its new
// certificate served at once; a Secret of that name that the manager did
// not make is left alone, and nothing from it is served.
func TestSecretOwnership(t *testing.T) {
	cfg := controlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)

	t.Run("deleted", func(t *testing.T) {
		rctx, stop := context.WithCancel(ctx)
		r := startReplica(t, rctx, cfg, nil, "replica")
		t.Cleanup(stop) // before startReplica's cleanup waits for it to end
		var first *corev1.Secret
		eventually(t, "the Secret is made and served", func() error {
			var err error
			if first, err = cs.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{}); err != nil {
				return err
			}
			if cert, _ := r.p.CurrentCertKeyContent(); string(cert) != string(first.Data[servingcert.KeyCert]) {
				return fmt.Errorf("not served yet")
			}
			return nil
		})
		if err := cs.CoreV1().Secrets(namespace).Delete(ctx, secretName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a new Secret is made and served", func() error {
			s, err := cs.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.UID == first.UID || string(s.Data[servingcert.KeyCABundle]) == string(first.Data[servingcert.KeyCABundle]) {
				return fmt.Errorf("still the first Secret")
			}
			if _, err := servedCertificate(r.srv.URL, s.Data[servingcert.KeyCABundle], time.Now); err != nil {
				return fmt.Errorf("a client trusting the new bundle: %w", err)
			}
			return nil
		})
	})

	t.Run("not ours", func(t *testing.T) {
		const other = "hand-made"
		foreign := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: other, Namespace: namespace},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"tls.crt": []byte("mine")},
		}
		if _, err := cs.CoreV1().Secrets(namespace).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		refused := make(chan struct{})
		var once sync.Once
		log := funcr.New(func(prefix, args string) {
			t.Log(prefix, args)
			if strings.Contains(args, "was not made by hookkeeper") {
				once.Do(func() { close(refused) })
			}
		}, funcr.Options{})
		p, err := servingcert.New(servingcert.Options{
			Client: cs, Namespace: namespace, SecretName: other, Policy: policy, Log: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		pctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Start(pctx) }()
		select {
		case <-refused:
		case <-time.After(30 * time.Second):
			t.Fatal("the provisioner did not report the Secret as not its own")
		}
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
		s, err := cs.CoreV1().Secrets(namespace).Get(ctx, other, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(s.Data["tls.crt"]) != "mine" || len(s.Data) != 1 {
			t.Errorf("the provisioner overwrote a Secret it did not make")
		}
		if cert, _ := p.CurrentCertKeyContent(); cert != nil {
			t.Errorf("serving from a Secret it did not make")
		}
	})
}
