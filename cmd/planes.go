package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// The data plane outlives the control plane (issue #44, docs/adr/0049).
// The engine, the HTTP API, the aggregated API, the serving certificate,
// the probes, metrics and pprof run for the life of the process, from the
// ledger, whatever the API server does. The controllers run in a
// controller-runtime manager that is one incarnation of the control plane:
// when it stops (its leadership lost because the API server did not
// answer its renewals, or it could not even be set up because the API
// server does not answer at start), supervise builds a new one after a
// backoff, which campaigns again and, once elected, reconciles everything
// (status catches up with what happened meanwhile). The process exits only
// when asked to, or when the data plane itself fails.

// restartBackoff paces a component that keeps stopping: 1 s, doubling to
// 10 s, back to 1 s once an incarnation ran for a minute. The cap is
// short because the control plane's catching up after an outage waits
// for it (issue #44: status right within 30 s).
var restartBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 10 * time.Second}

// supervise runs fn until ctx ends, again after each return (with
// restartBackoff between), logging why it stopped. It returns when ctx
// ends.
func supervise(ctx context.Context, log logr.Logger, what string, b wait.Backoff, c clock.Clock, fn func(context.Context) error) {
	delay := b.DelayWithReset(c, time.Minute)
	_ = delay.Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err := abandonOnCancel(ctx, fn)
		if ctx.Err() != nil {
			return true, nil
		}
		if err == nil {
			err = errors.New("stopped")
		}
		log.Error(err, what+" stopped; the data plane goes on, and it starts again")
		return false, nil
	})
}

// abandonOnCancel runs fn and returns what it returns, or ctx's error as
// soon as ctx ends: a manager's setup blocked on an API server that does
// not answer (discovery has no timeout of its own) must not hold the
// process's shutdown. The goroutine left behind ends with the process.
func abandonOnCancel(ctx context.Context, fn func(context.Context) error) error {
	errc := make(chan error, 1)
	go func() { errc <- fn(ctx) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		select {
		case err := <-errc:
			return err
		case <-time.After(15 * time.Second): // long enough for a graceful stop
			return ctx.Err()
		}
	}
}

// serve runs srv until ctx ends, then shuts it down.
func serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// probes serves /healthz and /readyz on addr ("0" disables them).
// Liveness asks nothing but that the process serves: an API server that
// does not answer must not get the data plane restarted. Readiness is
// whether this replica can accept and deliver: ready reports the data
// plane's own checks (the engine's claim rounds, the serving certificate),
// never the API server's.
func probes(addr string, ready map[string]healthz.Checker) (func(context.Context) error, error) {
	mux := http.NewServeMux()
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	readiness := &healthz.Handler{Checks: ready}
	mux.Handle("/healthz", http.StripPrefix("/healthz", live))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", live))
	mux.Handle("/readyz", http.StripPrefix("/readyz", readiness))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", readiness))
	return listen(addr, "the probes", mux)
}

// pprofServer serves Go's pprof handlers on addr ("0" disables them).
func pprofServer(addr string) (func(context.Context) error, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return listen(addr, "pprof", mux)
}

// listen binds addr now (so that a taken port fails the start) and returns
// what serves h on it until its context ends; "0" or "" serves nothing.
func listen(addr, what string, h http.Handler) (func(context.Context) error, error) {
	if addr == "0" || addr == "" {
		return func(ctx context.Context) error { <-ctx.Done(); return nil }, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for %s on %s: %w", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return func(ctx context.Context) error { return serve(ctx, srv, ln) }, nil
}

// flushTraces exports the spans still buffered, for at most 5 seconds.
func flushTraces(stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		setupLog.Error(err, "flushing traces")
	}
}
