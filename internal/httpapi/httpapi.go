// Package httpapi is hookkeeper's HTTP API: producers publish events into
// the ledger, and tooling reads events, deliveries and attempts back
// through an adapter on the ledger's one read model, under the aggregated
// API's permissions (docs/adr/0014).
//
// A publish is answered only once the event and its deliveries are
// committed (group-committed with concurrent publishes), so a 201 means the
// event will be delivered even if the process dies right after. Publishing
// is idempotent by Idempotency-Key: the same key with the same body (as
// JSON, whatever its formatting) answers 200 with the original, a different
// body 409. Every answer is JSON, every error has a stable code, and no
// answer or log line carries an event's secrets, a request body or a token.
//
// The package depends on small interfaces (Publisher, Reader, Auth) rather
// than on the engine: of Kubernetes it knows only k8s.io/apiserver's
// authenticator and authorizer interfaces, which internal/kubeauth
// implements, so handler logic is tested without either.
package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// Defaults of Config: the publish core's.
const (
	DefaultMaxBodyBytes   = publish.DefaultMaxBytes
	DefaultMaxSecrets     = publish.DefaultMaxSecrets
	DefaultMaxFanOut      = publish.DefaultMaxFanOut
	DefaultPublishTimeout = publish.DefaultCommitTimeout
)

// Config wires a Handler. Reader, Auth and either Core or Publisher are
// required.
type Config struct {
	// Core is the process's one publish core (cmd builds it for both
	// doors, publish.Core.Through); the handler publishes through it, as
	// door "http". Nil: New builds one of its own from Publisher and the
	// publish settings below, for a handler alone (tests); with Core they
	// must be unset, the core's own being the ones that count.
	Core      *publish.Core
	Publisher Publisher
	Reader    Reader
	Auth      Auth
	// Acknowledger, when set, serves POST /v1/acks/{deliveryID} for
	// Callback-mode endpoints (authenticated by their signature, not Auth).
	Acknowledger Acknowledger
	// Log receives request failures; never bodies, secrets or tokens.
	Log logr.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxBodyBytes bounds a publish body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxSecrets bounds the secrets of one event (default DefaultMaxSecrets).
	MaxSecrets int
	// MaxFanOut bounds the endpoints one event may be delivered to (default
	// DefaultMaxFanOut): an event whose type matches more is refused whole,
	// so that one publish cannot become an unbounded number of requests.
	MaxFanOut int
	// FilterEvalTimeout bounds one evaluation of an endpoint's filter
	// (publish.Config.FilterEvalTimeout).
	FilterEvalTimeout time.Duration
	// PublishTimeout bounds the wait for a commit (default
	// DefaultPublishTimeout); past it the answer is 503 and the outcome
	// unknown to the client, who retries with the same Idempotency-Key.
	PublishTimeout time.Duration
	// SecretsHashKey, when set, makes secret values part of the body hash
	// (as an HMAC under this key), so that reusing an Idempotency-Key with
	// different secret values is a 409. Without it only secret names count.
	// Keep it stable for at least the longest replay window.
	SecretsHashKey []byte
	// PublishMetrics, when set, counts publishes the ledger could not take
	// (door "http").
	PublishMetrics *publish.Metrics
	// Contracts, when set, holds publishes to their types' contracts
	// (publish.Config.Contracts).
	Contracts publish.Contracts
}

// Handler serves the API. Build it with New.
type Handler struct {
	cfg  Config
	core *publish.Core
	mux  *http.ServeMux
}

// handlerFunc serves one route for an authenticated, authorized caller in
// a valid namespace; an error becomes the answer (see asAPIError).
type handlerFunc func(w http.ResponseWriter, r *http.Request, namespace string) error

type route struct {
	method string
	path   string
	// access is the permission the route needs; serve fills its namespace
	// and name.
	access  Access
	nameVar string // path variable naming the object, if any
	fn      handlerFunc
	// span, when set, names the server span that covers the request,
	// authentication included, continuing the caller's trace (tracing).
	span string
}

// New validates cfg, fills its defaults and returns the Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Reader == nil || cfg.Auth == nil || (cfg.Core == nil && cfg.Publisher == nil) {
		return nil, errors.New("httpapi: Reader, Auth and either Core or Publisher are required")
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	core := cfg.Core
	if core != nil {
		if cfg.Publisher != nil || cfg.MaxBodyBytes != 0 || cfg.MaxSecrets != 0 || cfg.MaxFanOut != 0 || cfg.FilterEvalTimeout != 0 ||
			cfg.PublishTimeout != 0 || cfg.SecretsHashKey != nil || cfg.PublishMetrics != nil || cfg.Contracts != nil || cfg.Now != nil {
			return nil, errors.New("httpapi: with Core, the publish settings are the core's: leave Publisher, Now, MaxBodyBytes, MaxSecrets, MaxFanOut, FilterEvalTimeout, PublishTimeout, SecretsHashKey, PublishMetrics and Contracts unset")
		}
		core = core.Through(publish.DoorHTTP)
	} else {
		var err error
		core, err = publish.New(publish.Config{
			Committer: cfg.Publisher, Now: cfg.Now, MaxBytes: cfg.MaxBodyBytes, MaxSecrets: cfg.MaxSecrets, MaxFanOut: cfg.MaxFanOut,
			FilterEvalTimeout: cfg.FilterEvalTimeout, CommitTimeout: cfg.PublishTimeout, SecretsHashKey: cfg.SecretsHashKey, Door: publish.DoorHTTP, Metrics: cfg.PublishMetrics,
			Contracts: cfg.Contracts,
		})
		if err != nil {
			return nil, err
		}
	}
	// The handler reads the clock and the body limit too: the same
	// defaults the publish core filled in.
	pc := core.Config()
	cfg.Now, cfg.MaxBodyBytes = pc.Now, pc.MaxBytes
	cfg.MaxSecrets, cfg.MaxFanOut, cfg.PublishTimeout = pc.MaxSecrets, pc.MaxFanOut, pc.CommitTimeout
	h := &Handler{cfg: cfg, core: core, mux: http.NewServeMux()}

	const ns = "/v1/namespaces/{namespace}"
	publishEvent := Access{Verb: VerbCreate, APIGroup: PublishGroup, Resource: ResourceEvents}
	// Reads ask what the aggregated API asks for the same read.
	getEvent := Access{Verb: VerbGet, APIGroup: HistoryGroup, Resource: ResourceWebhookEvents}
	listDeliveries := Access{Verb: VerbList, APIGroup: HistoryGroup, Resource: ResourceDeliveries}
	getDelivery := Access{Verb: VerbGet, APIGroup: HistoryGroup, Resource: ResourceDeliveries}
	routes := []route{
		{http.MethodPost, ns + "/events", publishEvent, "", h.publish, tracing.PublishSpan},
		{http.MethodGet, ns + "/events/{id}", getEvent, "id", h.getEvent, ""},
		{http.MethodGet, ns + "/deliveries", listDeliveries, "", h.listDeliveries, ""},
		{http.MethodGet, ns + "/deliveries/{id}", getDelivery, "id", h.getDelivery, ""},
		// Attempts are part of a delivery, as in the aggregated API's get.
		{http.MethodGet, ns + "/deliveries/{id}/attempts", getDelivery, "id", h.listAttempts, ""},
	}
	for _, rt := range routes {
		h.mux.Handle(rt.method+" "+rt.path, h.serve(rt))
		// Any other method on a known path: a JSON 405 rather than the
		// mux's plain-text one. (GET patterns also serve HEAD.)
		allow := rt.method
		if rt.method == http.MethodGet {
			allow = "GET, HEAD"
		}
		h.mux.Handle(rt.path, methodNotAllowed(allow))
	}
	if cfg.Acknowledger != nil {
		h.mux.HandleFunc("POST /v1/acks/{deliveryID}", h.ack)
		h.mux.Handle("/v1/acks/{deliveryID}", methodNotAllowed(http.MethodPost))
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusNotFound, CodeNotFound, "", "no such API path"))
	})
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setAnswerHeaders(w)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.cfg.Log.Error(fmt.Errorf("panic: %v", v), "Handler panicked",
				"method", r.Method, "path", r.URL.Path, "stack", string(debug.Stack()))
			writeError(w, internalError(nil))
		}
	}()
	// ServeMux would redirect an unclean path (//, /./, /../) with an HTML
	// 301; no API path is unclean, so answer as for any unknown path.
	if r.URL.Path != cleanPath(r.URL.Path) {
		writeError(w, newError(http.StatusNotFound, CodeNotFound, "", "no such API path"))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// setAnswerHeaders sets what every answer of the API carries: API answers
// are not to be cached, and are JSON whatever they look like.
func setAnswerHeaders(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// cleanPath is ServeMux's notion of a canonical path.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, newError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "",
			"method %s is not allowed here; allowed: %s", r.Method, allow))
	}
}

// serve authenticates, validates the namespace, authorizes, runs rt.fn and
// answers its error, in that order: an anonymous caller learns nothing
// beyond 401. A request that authenticated proves its connection (see
// connLimiter): the connection cap no longer closes it for a stranger.
func (h *Handler) serve(rt route) http.HandlerFunc {
	pattern := rt.method + " " + rt.path
	return func(w http.ResponseWriter, r *http.Request) {
		ns := r.PathValue("namespace")
		log := h.cfg.Log.WithValues("route", pattern, "namespace", ns)
		if rt.span != "" && tracing.Enabled() {
			ctx, span := tracing.StartServer(r.Context(), r.Header, rt.span, tracing.AttrNamespace.String(ns))
			defer span.End()
			r = r.WithContext(ctx)
			w = &tracedWriter{ResponseWriter: w, span: span}
		}

		resp, ok, err := h.cfg.Auth.AuthenticateRequest(r)
		switch {
		case err != nil && !ok:
			h.fail(w, log, authError(err))
			return
		case !ok || resp == nil || resp.User == nil:
			h.fail(w, log, newError(http.StatusUnauthorized, CodeUnauthenticated, "", "a valid bearer token is required"))
			return
		}
		if lc := requestConn(r.Context()); lc != nil {
			lc.prove()
		}
		u := resp.User
		log = log.WithValues("user", u.GetName())
		if !validNamespace(ns) {
			h.fail(w, log, badRequest(CodeInvalidField, "namespace",
				"namespace must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit"))
			return
		}
		access := rt.access
		access.Namespace = ns
		if rt.nameVar != "" {
			access.Name = r.PathValue(rt.nameVar)
		}
		decision, reason, err := h.cfg.Auth.Authorize(r.Context(), access.attributes(u))
		switch {
		case decision == authorizer.DecisionAllow:
		case err != nil:
			h.fail(w, log, authError(err))
			return
		default:
			log.V(1).Info("Not authorized", "access", access.String(), "reason", reason)
			h.fail(w, log, newError(http.StatusForbidden, CodeForbidden, "",
				"user %q may not %s in namespace %q", u.GetName(), access, ns))
			return
		}
		if err := rt.fn(w, r.WithContext(withUser(r.Context(), u)), ns); err != nil {
			h.fail(w, log, err)
		}
	}
}

// fail answers err and logs it: server errors with their cause, client
// errors at V(1) with their code only.
func (h *Handler) fail(w http.ResponseWriter, log logr.Logger, err error) {
	ae := asAPIError(err)
	if ae.status >= 500 && !ae.quiet {
		log.Error(ae.cause, "Request failed", "status", ae.status, "code", ae.code)
	} else {
		log.V(1).Info("Request refused", "status", ae.status, "code", ae.code, "field", ae.field)
	}
	writeError(w, ae)
}
