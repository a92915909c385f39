package servingcert

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// The Secret's owner, so that the manager never overwrites a Secret it did
// not make.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "hookkeeper-servingcert"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch;create;update

// Options configure a Provisioner.
type Options struct {
	Client     kubernetes.Interface
	Namespace  string
	SecretName string
	Policy     Policy
	// Clock drives rotation; nil means the real clock.
	Clock clock.WithTicker
	Log   logr.Logger
}

// Provisioner keeps a CA and a serving certificate in a Secret current and
// serves what the Secret holds. Every replica runs one: they agree through
// the Secret (create if absent, update on the resourceVersion read; the
// loser of a race reads the winner's), and each watches it and reloads.
//
// It implements dynamiccertificates.CertKeyContentProvider (for a
// k8s.io/apiserver server) and tls.Config.GetCertificate (for a net/http
// server), both reading the current certificate at each handshake.
type Provisioner struct {
	opts    Options
	current atomic.Pointer[served]
	kick    chan struct{}
	loaded  chan struct{}
	once    sync.Once

	mu        sync.Mutex
	listeners []dynamiccertificates.Listener
}

// served is the certificate being served and the bundle that trusts it.
type served struct {
	cert            tls.Certificate
	certPEM, keyPEM []byte
	bundle          []byte
}

var _ dynamiccertificates.CertKeyContentProvider = (*Provisioner)(nil)

// New checks o and returns a Provisioner to Start.
func New(o Options) (*Provisioner, error) {
	if o.Client == nil {
		return nil, errors.New("servingcert: Client is required")
	}
	if o.Namespace == "" || o.SecretName == "" {
		return nil, errors.New("servingcert: the Secret's namespace and name are required")
	}
	if err := o.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("servingcert: %w", err)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Provisioner{opts: o, kick: make(chan struct{}, 1), loaded: make(chan struct{})}, nil
}

// Start keeps the Secret current and watches it until ctx ends. It runs on
// every replica.
func (p *Provisioner) Start(ctx context.Context) error {
	lw := cache.NewFilteredListWatchFromClient(p.opts.Client.CoreV1().RESTClient(), "secrets", p.opts.Namespace,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.opts.SecretName).String()
		})
	informer := cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
	onChange := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			p.load(s)
		}
		p.Enqueue()
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onChange,
		UpdateFunc: func(_, obj any) { onChange(obj) },
		DeleteFunc: func(any) { p.Enqueue() },
	}); err != nil {
		return fmt.Errorf("watching the Secret %s/%s: %w", p.opts.Namespace, p.opts.SecretName, err)
	}
	go informer.RunWithContext(ctx)

	failures := 0
	p.Enqueue()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var fired <-chan time.Time
		if timer != nil {
			fired = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-fired:
		}
		next, err := p.reconcile(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			next = p.opts.Clock.Now().Add(min(time.Second<<min(failures, 6), time.Minute))
			p.opts.Log.Error(err, "keeping the serving certificate current; retrying", "secret", p.opts.Namespace+"/"+p.opts.SecretName, "retryAt", next)
		} else {
			failures = 0
		}
		if timer != nil {
			timer.Stop()
		}
		timer = p.timerUntil(next)
	}
}

// timerUntil returns a timer that fires at next, or nil after asking for a
// reconcile at once when next has come. A timer counts from the moment it is
// made: if the clock jumped between reading it and making the timer (a
// test's fake clock), the timer would fire late, so it is made again.
func (p *Provisioner) timerUntil(next time.Time) clock.Timer {
	for {
		now := p.opts.Clock.Now()
		if !now.Before(next) {
			p.Enqueue()
			return nil
		}
		t := p.opts.Clock.NewTimer(next.Sub(now))
		if p.opts.Clock.Since(now) < time.Second {
			return t
		}
		t.Stop()
	}
}

// Enqueue asks for a reconcile (dynamiccertificates.Listener).
func (p *Provisioner) Enqueue() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// reconcile reads the Secret, decides, and writes what the decision asks
// for, until the Secret needs nothing; it returns when to look again.
func (p *Provisioner) reconcile(ctx context.Context) (time.Time, error) {
	secrets := p.opts.Client.CoreV1().Secrets(p.opts.Namespace)
	for range 5 {
		now := p.opts.Clock.Now()
		secret, err := secrets.Get(ctx, p.opts.SecretName, metav1.GetOptions{})
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("reading the Secret: %w", err)
		}
		var m material
		if exists {
			if secret.Labels[managedByLabel] != managedBy {
				return time.Time{}, fmt.Errorf("the Secret %s/%s exists but was not made by hookkeeper (no label %s=%s): delete it, or serve a certificate of your own with --api-tls-cert-file", p.opts.Namespace, p.opts.SecretName, managedByLabel, managedBy)
			}
			if m, err = parseMaterial(secret.Data); err != nil {
				p.opts.Log.Info("the serving certificate Secret is not usable; making a new CA and certificate", "secret", p.opts.Namespace+"/"+p.opts.SecretName, "problem", err.Error())
				m = material{}
			}
		}
		plan := Decide(now, m.state(), p.opts.Policy)
		if !plan.Changes(m.state()) {
			p.load(secret)
			return plan.Next, nil
		}
		next, err := apply(m, plan, now, p.opts.Policy)
		if err != nil {
			return time.Time{}, err
		}
		p.opts.Log.Info("rotating the serving certificate", "secret", p.opts.Namespace+"/"+p.opts.SecretName, "reasons", plan.Reasons, "newCA", plan.NewCA, "newCertificate", plan.IssueLeaf, "bundle", len(next.cas))
		if exists {
			secret = secret.DeepCopy()
			secret.Data = next.data()
			_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: managedBy})
		} else {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Name: p.opts.SecretName, Namespace: p.opts.Namespace,
					Labels: map[string]string{managedByLabel: managedBy},
				},
				Type: corev1.SecretTypeTLS,
				Data: next.data(),
			}, metav1.CreateOptions{FieldManager: managedBy})
		}
		// Losing a race is normal with several replicas: read the winner's
		// and decide again.
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("writing the Secret: %w", err)
		}
	}
	return time.Time{}, errors.New("the Secret kept changing while it was rotated")
}

// load serves the certificate of s if it is usable and new, and tells the
// listeners.
func (p *Provisioner) load(s *corev1.Secret) {
	if s == nil || s.Labels[managedByLabel] != managedBy {
		return
	}
	m, err := parseMaterial(s.Data)
	if err != nil || m.leaf == nil {
		return
	}
	if cur := p.current.Load(); cur != nil && string(cur.certPEM) == string(m.leaf.certPEM) && string(cur.bundle) == string(m.bundle()) {
		return
	}
	cert, err := tls.X509KeyPair(m.leaf.certPEM, m.leaf.keyPEM)
	if err != nil {
		return
	}
	p.current.Store(&served{cert: cert, certPEM: m.leaf.certPEM, keyPEM: m.leaf.keyPEM, bundle: m.bundle()})
	p.opts.Log.Info("serving a certificate from the Secret", "secret", p.opts.Namespace+"/"+p.opts.SecretName,
		"notAfter", cert.Leaf.NotAfter, "serial", cert.Leaf.SerialNumber.Text(16), "bundle", len(m.cas))
	p.once.Do(func() { close(p.loaded) })
	p.mu.Lock()
	listeners := append([]dynamiccertificates.Listener(nil), p.listeners...)
	p.mu.Unlock()
	for _, l := range listeners {
		l.Enqueue()
	}
}

// Loaded is closed once a certificate is served.
func (p *Provisioner) Loaded() <-chan struct{} { return p.loaded }

// GetCertificate returns the current certificate, for tls.Config.
func (p *Provisioner) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cur := p.current.Load()
	if cur == nil {
		return nil, errors.New("no serving certificate yet")
	}
	return &cur.cert, nil
}

// Name identifies the provider (dynamiccertificates.CertKeyContentProvider).
func (p *Provisioner) Name() string { return "secret/" + p.opts.Namespace + "/" + p.opts.SecretName }

// CurrentCertKeyContent returns the PEM certificate and key being served.
func (p *Provisioner) CurrentCertKeyContent() ([]byte, []byte) {
	cur := p.current.Load()
	if cur == nil {
		return nil, nil
	}
	return cur.certPEM, cur.keyPEM
}

// CurrentCABundleContent returns the PEM CA bundle that trusts the
// certificate being served (and, during a rollover, the next one).
func (p *Provisioner) CurrentCABundleContent() []byte {
	cur := p.current.Load()
	if cur == nil {
		return nil
	}
	return cur.bundle
}

// AddListener registers l to be told when the served certificate changes.
func (p *Provisioner) AddListener(l dynamiccertificates.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listeners = append(p.listeners, l)
}
