// Package aggregated runs hookkeeper's aggregated delivery API server on a
// front-proxied test control plane (testenv.StartAggregated), for the tests
// of both doors. It is apart from testenv so that testenv's other users
// (the process suites, hack/devcluster) do not build the server.
package aggregated

import (
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/deliveryapi"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// Start starts the control plane of opts (testenv.StartAggregated), stopped
// when the test ends.
func Start(t testing.TB, opts testenv.AggregatedOptions) *testenv.Aggregated {
	t.Helper()
	cp, err := testenv.StartAggregated(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	return cp
}

// Serve runs the aggregated server of cfg on cp's listener, serving
// certificate and admin kubeconfig until the test ends. It stops before
// what the test opened earlier (its ledger) is closed, and a server that
// ends with an error fails the test.
func Serve(t testing.TB, cp *testenv.Aggregated, cfg deliveryapi.Config) {
	t.Helper()
	cert, err := deliveryapi.FileCert(cp.CertFile, cp.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener, cfg.Cert, cfg.Kubeconfig = cp.Listener, cert, cp.Kubeconfig
	srv, err := deliveryapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := cp.Serve(srv.Start)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}
