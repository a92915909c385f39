package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// apiServer builds the HTTP API on the process's publish core, which runs on every replica for the life
// of the process (the data plane, issue #44) and shuts down gracefully
// when its context ends. cfg reaches the API
// server for --api-auth=kubernetes; certs is the self-provisioned
// certificate (nil without --serving-cert-secret).
func apiServer(o apiOptions, cfg *rest.Config, core *publish.Core, eng *engine.Engine, store ledger.Store, certs certificateSource) (func(context.Context) error, error) {
	log := ctrl.Log.WithName("api")
	auth, err := o.buildAuth(cfg, log)
	if err != nil {
		return nil, err
	}
	tlsConfig, certFiles, err := o.tlsConfig(log, certs)
	if err != nil {
		return nil, err
	}
	handler, err := httpapi.New(httpapi.Config{
		Core: core, Reader: store, Auth: auth, Acknowledger: eng, Log: log,
	})
	if err != nil {
		return nil, err
	}
	srv := httpapi.NewServer(o.addr, handler, httpapi.ServerOptions{
		MaxConnections:                  o.maxConnections,
		MaxUnprovenConnectionsPerSource: o.maxUnprovenPerSource,
		MaxBodyBytesInFlight:            o.maxBodyBytesInFlight,
		Registerer:                      ctrlmetrics.Registry,
	})
	srv.TLSConfig = tlsConfig
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
		if err := registerCertificateExpiry(ctrlmetrics.Registry, tlsConfig); err != nil {
			return nil, fmt.Errorf("registering the API certificate's metric: %w", err)
		}
	}
	return func(ctx context.Context) error {
		errc := make(chan error, 2)
		if certFiles != nil {
			go func() {
				if err := certFiles.Start(ctx); err != nil {
					errc <- fmt.Errorf("watching the API's certificate: %w", err)
				}
			}()
		}
		go func() {
			if tlsConfig != nil {
				errc <- srv.ListenAndServeTLS("", "")
			} else {
				errc <- srv.ListenAndServe()
			}
		}()
		log.Info("serving the HTTP API", "address", o.addr, "scheme", scheme, "auth", o.auth)
		select {
		case err := <-errc:
			return fmt.Errorf("serving the HTTP API: %w", err)
		case <-ctx.Done():
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("shutting down the HTTP API: %w", err)
		}
		return nil
	}, nil
}

// readTokens reads "<token> <username>" lines; blank lines and lines
// starting with # are skipped. The tokens themselves are never logged.
func readTokens(path string) (httpapi.StaticTokens, error) {
	tokens := httpapi.StaticTokens{}
	if path == "" {
		return tokens, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading --api-token-file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		token, user, ok := strings.Cut(line, " ")
		if !ok || strings.TrimSpace(user) == "" {
			return nil, fmt.Errorf("--api-token-file line %d: want \"<token> <username>\"", n)
		}
		tokens[token] = httpapi.Principal{Username: strings.TrimSpace(user)}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading --api-token-file: %w", err)
	}
	return tokens, nil
}
