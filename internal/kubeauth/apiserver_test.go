package kubeauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/kubeauth"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestAgainstTheAPIServer runs the API with kubeauth against the real
// kube-apiserver (envtest: RBAC authorization, ServiceAccount token signing
// configured) and the real engine on SQLite: a ServiceAccount token from
// the TokenRequest API is refused until a RoleBinding grants it the
// shipped ClusterRole, reading needs the reader role, and a deleted
// ServiceAccount's token stops working.
func TestAgainstTheAPIServer(t *testing.T) {
	cfg, cs, store, eng := controlPlaneAndEngine(t)
	ctx := t.Context()

	// The engine on SQLite, with an endpoint in shop and one in other.
	for _, ns := range []string{"shop", "other"} {
		if _, err := eng.RegisterEndpoint(ctx, ledger.Endpoint{
			Namespace: ns, Name: "billing", URL: "https://receiver.example/billing", EventTypes: []string{"order.*"},
			Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}}, AckMode: ledger.AckResponse,
		}); err != nil {
			t.Fatal(err)
		}
	}

	// The API, with short TTLs so that the test need not wait them out.
	newServer := func(audiences ...string) *httptest.Server {
		t.Helper()
		auth, err := kubeauth.NewForConfig(cfg, kubeauth.Options{
			Audiences: audiences,
			AuthnTTL:  100 * time.Millisecond, AuthnNegativeTTL: -1,
			AuthzTTL: 100 * time.Millisecond, AuthzNegativeTTL: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := httpapi.New(httpapi.Config{Publisher: eng, Reader: store, Auth: auth})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
	srv := newServer()

	// A producer ServiceAccount and a token for it, as a pod would get one.
	for _, ns := range []string{"shop", "other"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts("shop").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "producer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokenFor := func(audiences ...string) string {
		t.Helper()
		expiry := int64(3600)
		tr, err := cs.CoreV1().ServiceAccounts("shop").CreateToken(ctx, "producer", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &expiry},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		return tr.Status.Token
	}
	token := tokenFor()

	call := func(srv *httptest.Server, token, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	const event = `{"type":"order.created","data":{"order":1}}`
	publish := func(srv *httptest.Server, token, ns string) (int, string) {
		t.Helper()
		return call(srv, token, http.MethodPost, "/v1/namespaces/"+ns+"/events", event)
	}
	// eventually polls until f answers want: RBAC reaches the API
	// server's authorizer through an informer, a moment after the write.
	eventually := func(what string, want int, f func() (int, string)) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			status, body := f()
			if status == want {
				return body
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d %s, want %d", what, status, body, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	expect := func(what string, want int, status int, body string) {
		t.Helper()
		if status != want {
			t.Errorf("%s: %d %s, want %d", what, status, body, want)
		}
	}

	// Unauthenticated: 401.
	status, body := publish(srv, "", "shop")
	expect("no token", http.StatusUnauthorized, status, body)
	status, body = publish(srv, "not-a-kubernetes-token", "shop")
	expect("a made-up token", http.StatusUnauthorized, status, body)

	// Authenticated, no RBAC: 403 for publishing and reading.
	status, body = publish(srv, token, "shop")
	expect("a ServiceAccount without a RoleBinding", http.StatusForbidden, status, body)
	if !strings.Contains(body, `"Forbidden"`) || !strings.Contains(body, "system:serviceaccount:shop:producer") {
		t.Errorf("403 body = %s", body)
	}
	status, body = call(srv, token, http.MethodGet, "/v1/namespaces/shop/deliveries?endpoint=billing", "")
	expect("reading without RBAC", http.StatusForbidden, status, body)

	// The shipped publisher ClusterRole, bound in shop: 201 in shop only.
	publisher := applyClusterRole(t, cs, "event_publisher_role.yaml")
	bind(t, cs, "shop", "producer-publishes", "ClusterRole", publisher)
	body = eventually("publishing once bound", http.StatusCreated, func() (int, string) { return publish(srv, token, "shop") })
	var published struct {
		ID         string `json:"id"`
		Deliveries []struct {
			Endpoint string `json:"endpoint"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal([]byte(body), &published); err != nil || published.ID == "" ||
		len(published.Deliveries) != 1 || published.Deliveries[0].Endpoint != "billing" {
		t.Errorf("201 body = %s (%v)", body, err)
	}
	status, body = publish(srv, token, "other")
	expect("publishing in a namespace without the RoleBinding", http.StatusForbidden, status, body)

	// A publisher may not read.
	status, body = call(srv, token, http.MethodGet, "/v1/namespaces/shop/events/"+published.ID, "")
	expect("reading with the publisher role only", http.StatusForbidden, status, body)

	// The shipped reader ClusterRole: reads in shop.
	reader := applyClusterRole(t, cs, "delivery_reader_role.yaml")
	bind(t, cs, "shop", "producer-reads", "ClusterRole", reader)
	eventually("reading the event once bound", http.StatusOK, func() (int, string) {
		return call(srv, token, http.MethodGet, "/v1/namespaces/shop/events/"+published.ID, "")
	})
	status, body = call(srv, token, http.MethodGet, "/v1/namespaces/shop/deliveries?endpoint=billing", "")
	expect("listing deliveries", http.StatusOK, status, body)

	// A plain Role of the application's own, naming events.hookkeeper.dev,
	// works as well.
	if _, err := cs.RbacV1().Roles("other").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "publish-events"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"hookkeeper.dev"}, Resources: []string{"events"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, cs, "other", "shop-producer-publishes", "Role", "publish-events")
	eventually("publishing with an own Role", http.StatusCreated, func() (int, string) { return publish(srv, token, "other") })

	// Audiences: a token made for hookkeeper is not an API server token,
	// and an API that asks for the hookkeeper audience refuses the others.
	scoped := newServer("hookkeeper")
	hkToken := tokenFor("hookkeeper")
	status, body = publish(srv, hkToken, "shop")
	expect("a hookkeeper-audience token where the API server's audience is expected", http.StatusUnauthorized, status, body)
	status, body = publish(scoped, hkToken, "shop")
	expect("a hookkeeper-audience token where it is expected", http.StatusCreated, status, body)
	status, body = publish(scoped, token, "shop")
	expect("an API-server-audience token where hookkeeper's is expected", http.StatusUnauthorized, status, body)

	// The ServiceAccount deleted: its token stops working.
	if err := cs.CoreV1().ServiceAccounts("shop").Delete(ctx, "producer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("publishing after the ServiceAccount is deleted", http.StatusUnauthorized, func() (int, string) { return publish(srv, token, "shop") })
}

// TestOutageAgainstTheAPIServer stops the real kube-apiserver answering
// the Auth (its transport hangs until the review's deadline, as a
// SIGSTOPped API server leaves it) with the caches' TTLs over: a
// publisher whose token and permission were reviewed before keeps
// publishing within OutageGrace, without waiting for the reviews sent in
// the background (none of which has timed out when its 201s come
// back), a token never seen gets 503 with
// Retry-After, and so does the publisher once the grace is over; once the
// API server answers again, publishing works. The grace runs on an
// injected clock.
func TestOutageAgainstTheAPIServer(t *testing.T) {
	cfg, cs, store, eng := controlPlaneAndEngine(t)
	ctx := t.Context()
	if _, err := eng.RegisterEndpoint(ctx, ledger.Endpoint{
		Namespace: "shop", Name: "billing", URL: "https://receiver.example/billing", EventTypes: []string{"order.*"},
		Secrets: []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")}}, AckMode: ledger.AckResponse,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("shop").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "producer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, cs, "shop", "producer-publishes", "ClusterRole", applyClusterRole(t, cs, "event_publisher_role.yaml"))
	tokenFor := func() string {
		t.Helper()
		expiry := int64(3600)
		tr, err := cs.CoreV1().ServiceAccounts("shop").CreateToken(ctx, "producer", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &expiry},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		return tr.Status.Token
	}
	known, unseen := tokenFor(), tokenFor()

	// The Auth's way to the API server, which the test can stop: a
	// stopped API server answers nothing until released (never, as far as
	// the Auth can tell: the review's deadline comes first). timedOut
	// counts the reviews that gave up waiting.
	var stopped atomic.Bool
	var timedOut atomic.Int32
	release := make(chan struct{})
	authCfg := rest.CopyConfig(cfg)
	authCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if stopped.Load() {
				select {
				case <-release:
				case <-r.Context().Done():
					timedOut.Add(1)
					return nil, r.Context().Err()
				}
			}
			return rt.RoundTrip(r)
		})
	})
	clock := &testClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	auth, err := kubeauth.NewForConfig(authCfg, kubeauth.Options{
		// No caching: every request is a review, as once the TTLs are over.
		AuthnTTL: -1, AuthnNegativeTTL: -1, AuthzTTL: -1, AuthzNegativeTTL: -1,
		ReviewTimeout: 3 * time.Second, Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Config{Publisher: eng, Reader: store, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	publish := func(token string) (status int, retryAfter, body string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/namespaces/shop/events",
			strings.NewReader(`{"type":"order.created","data":{"order":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(data), token) {
			t.Errorf("the answer carries the token: %s", data)
		}
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(data)
	}
	// The RoleBinding reaches the API server's authorizer a moment after
	// the write.
	deadline := time.Now().Add(15 * time.Second)
	for status, _, body := publish(known); status != http.StatusCreated; status, _, body = publish(known) {
		if time.Now().After(deadline) {
			t.Fatalf("publishing before the outage: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	stopped.Store(true)
	clock.Advance(kubeauth.DefaultOutageGrace - time.Minute)
	for range 3 {
		if status, _, body := publish(known); status != http.StatusCreated {
			t.Errorf("a known publisher within the grace: %d %s, want 201", status, body)
		}
	}
	// The publishes did not wait for their reviews: none has given up yet,
	// nor been answered.
	select {
	case <-release:
		t.Fatal("released")
	default:
		if n := timedOut.Load(); n != 0 {
			t.Errorf("%d reviews timed out before the known publisher's 201s, want 0: it waited for them", n)
		}
	}
	if status, ra, body := publish(unseen); status != http.StatusServiceUnavailable || ra == "" || !strings.Contains(body, `"Unavailable"`) {
		t.Errorf("a token never seen: %d (Retry-After %q) %s, want 503 Unavailable with Retry-After", status, ra, body)
	}
	clock.Advance(time.Minute + time.Second)
	if status, ra, body := publish(known); status != http.StatusServiceUnavailable || ra == "" || !strings.Contains(body, `"Unavailable"`) {
		t.Errorf("a known publisher after the grace: %d (Retry-After %q) %s, want 503 Unavailable with Retry-After", status, ra, body)
	}

	stopped.Store(false)
	close(release)
	for _, token := range []string{known, unseen} {
		if status, _, body := publish(token); status != http.StatusCreated {
			t.Errorf("after the outage: %d %s, want 201", status, body)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// applyClusterRole creates the ClusterRole of config/rbac/file and returns
// its name (without the installer's hookkeeper- prefix).
func applyClusterRole(t *testing.T, cs kubernetes.Interface, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if role.Kind != "ClusterRole" {
		t.Fatalf("%s is a %s", file, role.Kind)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return role.Name
}

// bind grants the role to the ServiceAccount shop/producer in ns.
func bind(t *testing.T, cs kubernetes.Interface, ns, name, kind, role string) {
	t.Helper()
	if _, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "producer", Namespace: "shop"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// controlPlaneAndEngine starts the real control plane (envtest) and the
// real engine on a SQLite ledger of the test's own; both stop when the test
// ends.
func controlPlaneAndEngine(t *testing.T) (*rest.Config, kubernetes.Interface, *sqlite.Store, *engine.Engine) {
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
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	eng, err := engine.New(engine.Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	return cfg, kubernetes.NewForConfigOrDie(cfg), store, eng
}
