package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// What the manager adds (issue #15, goal 6): the cost steps run the engine
// as enginehost (the engine and its HTTP API without Kubernetes), which
// `make bench` can start in a second. This step measures once, at a steady
// 500 events/s, the real manager (cmd/) with a real control plane (etcd
// and kube-apiserver, as test/e2e starts them) and a WebhookEndpoint
// object, against enginehost on the same ledger kind back to back.

type managerResults struct {
	manager, enginehost costRun
	controlPlaneCPU     time.Duration // per event, etcd + kube-apiserver
}

const managerRate = 500

func runManager(cfg config, bin, work string, m *managerResults) error {
	step(fmt.Sprintf("the real manager against enginehost at %d events/s on SQLite", managerRate))
	t, err := startTracker()
	if err != nil {
		return err
	}
	defer t.close()
	dir := filepath.Join(work, "manager")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// kube-apiserver starts slowly on a busy machine: envtest's default
	// 20 s is not always enough.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		_ = os.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "2m")
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	suite, err := testenv.StartSuite(dir)
	if err != nil {
		return err
	}
	defer func() { _ = suite.Env.Stop() }()
	mgr, err := startManagerProcess(suite.Manager, dir, suite.Kubeconfig)
	if err != nil {
		return err
	}
	defer mgr.stop()
	objects := `apiVersion: v1
kind: Namespace
metadata:
  name: bench
---
apiVersion: hookkeeper.dev/v1alpha1
kind: WebhookEndpoint
metadata:
  name: receiver
  namespace: bench
spec:
  url: ` + t.url + `
  eventTypes: ["*"]
  maxInFlight: 512
`
	if out, err := testenv.RunKubectl(suite.Kubectl, suite.Kubeconfig, objects, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	if out, err := testenv.RunKubectl(suite.Kubectl, suite.Kubeconfig, "", "wait", "-n", "bench", "webhookendpoint/receiver", "--for=condition=Ready", "--timeout=60s"); err != nil {
		return fmt.Errorf("%w: %s\n%s", err, out, testenv.Tail(mgr.log, 30))
	}
	controlPlane := func() ([]int, error) { return childrenNamed(os.Getpid(), "etcd", "kube-apiserver") }
	tg := target{url: "http://" + mgr.addr + "/v1/namespaces/bench/events", token: token}
	if m.manager, err = drive(cfg, t, "manager-500", mgr.cmd.Process.Pid, tg, controlPlane, managerRate); err != nil {
		return err
	}
	m.controlPlaneCPU, m.manager.serverCPU = m.manager.serverCPU, 0
	m.enginehost, err = measureEngine(cfg, bin, t, "enginehost-500", []string{"--ledger", "sqlite://" + filepath.Join(dir, "enginehost.db")}, nil, managerRate)
	return err
}

// childrenNamed lists the children of parent whose command is one of names.
func childrenNamed(parent int, names ...string) ([]int, error) {
	kids, err := childrenOf(parent)
	if err != nil {
		return nil, err
	}
	var pids []int
	for pid := range kids {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil {
			continue
		}
		for _, n := range names {
			if strings.TrimSpace(string(comm)) == n {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

func waitReady(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (last: %v)", url, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
