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

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ingest"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// everyReplica runs fn on every replica, leader or not: with a shared
// ledger all replicas deliver, while the controllers run on the leader.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// apiServer builds the HTTP API as a manager runnable that runs on every
// replica and shuts down gracefully with the manager.
func apiServer(addr, tokenFile string, eng *engine.Engine, store ledger.Store) (everyReplica, error) {
	tokens, err := readTokens(tokenFile)
	if err != nil {
		return nil, err
	}
	log := ctrl.Log.WithName("api")
	if len(tokens) == 0 {
		log.Info("no --api-token-file: every API request is refused with 401")
	}
	handler, err := ingest.New(ingest.Config{Publisher: eng, Reader: store, Auth: tokens, Acknowledger: eng, Log: log})
	if err != nil {
		return nil, err
	}
	srv := ingest.NewServer(addr, handler)
	return func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- srv.ListenAndServe() }()
		log.Info("serving the HTTP API", "address", addr)
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
func readTokens(path string) (ingest.StaticTokens, error) {
	tokens := ingest.StaticTokens{}
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
		tokens[token] = ingest.Principal{Username: strings.TrimSpace(user)}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading --api-token-file: %w", err)
	}
	return tokens, nil
}
