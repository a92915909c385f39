package deliveryapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	restclient "k8s.io/client-go/rest"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/deliveryapi/openapi"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// Config configures the aggregated API server.
type Config struct {
	// Ledger is read for every answer.
	Ledger Reader
	// Listener is where the server serves HTTPS (the manager opens it on
	// --aggregated-api-bind-address).
	Listener net.Listener
	// Cert is the serving certificate. It may change at any time (the
	// manager's certificate rotation, or FileCert's files on disk): the
	// server serves the new one without a restart.
	Cert dynamiccertificates.CertKeyContentProvider
	// Kubeconfig reaches the cluster's API server, to which authentication
	// (TokenReview, the front-proxy CA and headers from
	// kube-system/extension-apiserver-authentication) and authorization
	// (SubjectAccessReview) are delegated. Empty: the in-cluster config.
	Kubeconfig string
	// Now is the clock of the tables' ages (default time.Now).
	Now func() time.Time
	// Publisher, when set, makes webhookevents creatable: a create is a
	// publish through the HTTP API's path (httpapi.Ingest), with its
	// permission checked besides RBAC's (docs/adr/0013). Nil: read-only.
	Publisher Publisher
}

// FileCert is a Config.Cert read from a PEM certificate and key on disk and
// reloaded when the files change.
func FileCert(certFile, keyFile string) (dynamiccertificates.CertKeyContentProvider, error) {
	c, err := dynamiccertificates.NewDynamicServingContentFromFiles("delivery-api-serving", certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the delivery API's serving certificate: %w", err)
	}
	return c, nil
}

// Server is the aggregated API server, a controller-runtime Runnable that
// runs on every replica (each serves from the shared ledger).
type Server struct {
	srv *genericapiserver.GenericAPIServer
}

// NeedLeaderElection is false: every replica serves.
func (*Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then shuts down gracefully.
func (s *Server) Start(ctx context.Context) error {
	if err := s.srv.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("delivery API server: %w", err)
	}
	return nil
}

// New builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil || cfg.Listener == nil || cfg.Cert == nil {
		return nil, errors.New("delivery API server: Ledger, Listener and Cert are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := genericapiserver.NewRecommendedConfig(Codecs)
	c.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	// Profiling is the manager's business, not the API's.
	c.EnableProfiling = false
	// Nothing talks to this server through a loopback client (no
	// admission, no informers), but the generic server requires one.
	c.LoopbackClientConfig = &restclient.Config{}
	c.SecureServing = &genericapiserver.SecureServingInfo{Listener: cfg.Listener, Cert: cfg.Cert}
	if tracing.Enabled() {
		// The generic server's request span continues the traceparent
		// kube-apiserver forwards; a publish's span is its child (create.go).
		c.TracerProvider = processTracer{otel.GetTracerProvider()}
	}

	namer := openapinamer.NewDefinitionNamer(Scheme)
	c.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	c.OpenAPIConfig.Info.Title = "hookkeeper delivery history"
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	c.OpenAPIV3Config.Info.Title = "hookkeeper delivery history"

	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = cfg.Kubeconfig
	if err := authn.ApplyTo(&c.Authentication, c.SecureServing, c.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("delivery API server: delegated authentication: %w", err)
	}
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = cfg.Kubeconfig
	if err := authz.ApplyTo(&c.Authorization); err != nil {
		return nil, fmt.Errorf("delivery API server: delegated authorization: %w", err)
	}

	srv, err := c.Complete().New("hookkeeper-delivery-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("delivery API server: %w", err)
	}
	info := genericapiserver.NewDefaultAPIGroupInfo(v1alpha1.GroupName, Scheme, runtime.NewParameterCodec(Scheme), Codecs)
	info.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		DeliveriesResource:    newDeliveryStorage(cfg.Ledger, cfg.Now),
		WebhookEventsResource: eventsStorage(cfg, c.Authorization.Authorizer),
	}
	if err := srv.InstallAPIGroup(&info); err != nil {
		return nil, fmt.Errorf("delivery API server: installing %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return &Server{srv: srv}, nil
}

// eventsStorage serves webhookevents, creatable when cfg has a Publisher.
func eventsStorage(cfg Config, authz authorizer.Authorizer) rest.Storage {
	s := newEventStorage(cfg.Ledger, authz, cfg.Now)
	if cfg.Publisher == nil {
		return s
	}
	return &creatableEvents{eventStorage: s, publisher: cfg.Publisher}
}

// processTracer is the process's tracer provider as the generic server
// takes it; the process, not the server, shuts it down (cmd).
type processTracer struct{ trace.TracerProvider }

func (processTracer) Shutdown(context.Context) error { return nil }
