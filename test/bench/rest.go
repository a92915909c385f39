package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "modernc.org/sqlite" // reads the manager's SQLite ledger
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// Endpoints at rest (issue #26, item 5): the real manager (cmd/) with a
// real control plane and many WebhookEndpoints that receive nothing. What
// the manager then spends is what it costs to keep their status true
// while nothing happens; the floor is 0.02 cores for 10,000 endpoints.
// --rest-baseline measures another build of the manager (main's, say)
// right before this one on each store, on the same objects.

// restHeading starts the step's section of docs/benchmarks.md.
const restHeading = "## Endpoints at rest (issue #26)"

// restFloor is the most manager CPU 10,000 idle endpoints may cost, in
// cores.
const restFloor = 0.02

// restApp is the application_name of the measured manager's PostgreSQL
// connections, so that its backends are told from those of other tests
// and other bench steps on the shared server.
const restApp = "hookkeeper-bench-rest"

type restConfig struct {
	endpoints, namespaces int
	settle, window        time.Duration
	stores                string
	baseline              string
}

func (c *restConfig) bindFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.endpoints, "rest-endpoints", 10_000, "WebhookEndpoints of the rest step")
	fs.IntVar(&c.namespaces, "rest-namespaces", 40, "namespaces the rest step's endpoints are spread over")
	fs.DurationVar(&c.settle, "rest-settle", 45*time.Second, "how long the rest step lets the manager settle once every endpoint is registered")
	fs.DurationVar(&c.window, "rest-window", 2*time.Minute, "the rest step's measured window")
	fs.StringVar(&c.stores, "rest-stores", bothStores, "stores the rest step runs the manager on (postgres needs --postgres)")
	fs.StringVar(&c.baseline, "rest-baseline", "", "a manager binary of other code (main's, say) measured before this one on each store")
}

type restResults struct {
	endpoints, namespaces int
	window                time.Duration
	created               time.Duration // creating every endpoint, from the first request
	readyIn               time.Duration // from the first request until every one was Ready
	runs                  []restRun
}

// restRun is one manager at rest on one store.
type restRun struct {
	store, build string
	registered   time.Duration // from the manager's start until its ledger had every endpoint
	managerCPU   time.Duration // over the window
	userShare    float64
	controlPlane time.Duration // etcd and kube-apiserver over the window
	serverCPU    time.Duration // PostgreSQL: the manager's backends over the window
	scans        int64         // PostgreSQL: table scans in the ledger's schema over the window
	loadAvg      string
}

func (r *restRun) cores(d, window time.Duration) float64 { return d.Seconds() / window.Seconds() }

func runRest(cfg config, work string, res *restResults) error {
	rc := cfg.rest
	res.endpoints, res.namespaces, res.window = rc.endpoints, rc.namespaces, rc.window
	step(fmt.Sprintf("%d WebhookEndpoints at rest in %d namespaces, the real manager", rc.endpoints, rc.namespaces))
	dir := filepath.Join(work, "rest")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		_ = os.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "2m")
	}
	suite, err := testenv.StartSuite(dir)
	if err != nil {
		return err
	}
	defer func() { _ = suite.Env.Stop() }()
	// A receiver that is never called: nothing is published.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/hook"

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), hookv1.AddToScheme(scheme)); err != nil {
		return err
	}
	kcfg := *suite.Env.Config
	kcfg.QPS, kcfg.Burst = 1000, 2000
	c, err := client.New(&kcfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	builds := []struct{ name, bin string }{{"this build", suite.Manager}}
	if rc.baseline != "" {
		builds = append([]struct{ name, bin string }{{"baseline", rc.baseline}}, builds...)
	}
	created := false
	for _, store := range strings.Split(rc.stores, ",") {
		if store == "postgres" && cfg.postgres == "" {
			fmt.Println("rest: no --postgres, PostgreSQL skipped")
			continue
		}
		for i, b := range builds {
			run := restRun{store: store, build: b.name}
			ledger, cleanup, err := restLedger(cfg, dir, fmt.Sprintf("%s_%d", store, i))
			if err != nil {
				return err
			}
			err = func() error {
				defer cleanup()
				// Only this build is profiled: a baseline may predate
				// --pprof-bind-address.
				profile := ""
				if b.bin == suite.Manager {
					profile = filepath.Join(cfg.profileDir, "rest-"+store)
				}
				return restMeasure(rc, suite, c, b.bin, ledger, url, dir, profile, &run, !created, res)
			}()
			if err != nil {
				return fmt.Errorf("rest, %s on %s: %w", b.name, store, err)
			}
			created = true
			fmt.Printf("rest: %s on %s: %.4f cores (control plane %.4f, server %.4f, %d scans) over %s, load %s\n",
				b.name, store, run.cores(run.managerCPU, rc.window), run.cores(run.controlPlane, rc.window),
				run.cores(run.serverCPU, rc.window), run.scans, rc.window, run.loadAvg)
			res.runs = append(res.runs, run)
		}
	}
	return nil
}

// restLedger is a fresh ledger for one manager: its --ledger flag, and a
// function that counts its registered endpoints and table scans.
type restLedgerInfo struct {
	flag  string
	dsn   string // PostgreSQL: the manager's DSN (search_path, application_name)
	count func(ctx context.Context) (int, error)
	scans func(ctx context.Context) (int64, error)
}

func restLedger(cfg config, dir, name string) (*restLedgerInfo, func(), error) {
	if !strings.HasPrefix(name, "postgres") {
		path := filepath.Join(dir, name+".db")
		info := &restLedgerInfo{flag: "sqlite://" + path}
		info.count = func(ctx context.Context) (int, error) {
			db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
			if err != nil {
				return 0, err
			}
			defer db.Close()
			var n int
			err = db.QueryRowContext(ctx, `SELECT count(*) FROM endpoints WHERE deleted = 0`).Scan(&n)
			return n, err
		}
		return info, func() {}, nil
	}
	schema := fmt.Sprintf("hk_bench_rest_%s_%d", name, time.Now().UnixNano())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cfg.postgres)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		conn.Close(ctx)
		return nil, nil, err
	}
	sep := "?"
	if strings.Contains(cfg.postgres, "?") {
		sep = "&"
	}
	dsn := cfg.postgres + sep + "search_path=" + schema + "&application_name=" + restApp
	info := &restLedgerInfo{flag: dsn, dsn: dsn}
	info.count = func(ctx context.Context) (int, error) {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.endpoints WHERE deleted_at IS NULL`).Scan(&n)
		return n, err
	}
	info.scans = func(ctx context.Context) (int64, error) {
		var n int64
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0)::bigint
			FROM pg_stat_user_tables WHERE schemaname = $1`, schema).Scan(&n)
		return n, err
	}
	return info, func() {
		_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		conn.Close(ctx)
	}, nil
}

// restMeasure starts the manager bin on ledger, creates the endpoints if
// create (else waits until the manager registered those that exist),
// lets it settle and measures the window. With a profile prefix it writes
// CPU profiles of the manager: <profile>-register.pprof over the first
// minute of the creation, <profile>.pprof over the window.
func restMeasure(rc restConfig, suite *testenv.Suite, c client.Client, bin string, l *restLedgerInfo, url, dir, profile string, run *restRun, create bool, res *restResults) error {
	probeAddr, err := testenv.FreeAddr()
	if err != nil {
		return err
	}
	pprofAddr := ""
	if profile != "" {
		if pprofAddr, err = testenv.FreeAddr(); err != nil {
			return err
		}
	}
	logPath := filepath.Join(dir, fmt.Sprintf("manager-%s-%s.log", run.store, strings.ReplaceAll(run.build, " ", "-")))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin,
		"--ledger="+l.flag,
		"--health-probe-bind-address="+probeAddr,
		"--api-bind-address=0", // nothing is published
		"--allowed-destination-cidrs=127.0.0.0/8",
	)
	if pprofAddr != "" {
		cmd.Args = append(cmd.Args, "--pprof-bind-address="+pprofAddr)
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.Kubeconfig, "GOGC=400", "GOMEMLIMIT=400MiB")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := waitReady("http://"+probeAddr+"/readyz", 2*time.Minute); err != nil {
		return fmt.Errorf("manager: %w\n%s", err, testenv.Tail(logPath, 30))
	}
	ctx := context.Background()
	if create {
		t0 := time.Now()
		if pprofAddr != "" {
			registering := cpuProfile(pprofAddr, time.Minute, profile+"-register.pprof")
			defer func() { <-registering }()
		}
		if err := createRestEndpoints(ctx, c, rc, url); err != nil {
			return err
		}
		res.created = time.Since(t0)
		if err := waitAllReady(ctx, c, rc.endpoints, 30*time.Minute); err != nil {
			return fmt.Errorf("%w\n%s", err, testenv.Tail(logPath, 30))
		}
		res.readyIn = time.Since(t0)
	}
	for {
		n, err := l.count(ctx)
		if err != nil {
			// A count that cannot be read would wait out the deadline.
			return fmt.Errorf("counting the registered endpoints: %w", err)
		}
		if n >= rc.endpoints {
			break
		}
		if time.Since(start) > 30*time.Minute {
			return fmt.Errorf("%d of %d endpoints registered after 30m\n%s", n, rc.endpoints, testenv.Tail(logPath, 30))
		}
		time.Sleep(time.Second)
	}
	run.registered = time.Since(start)
	time.Sleep(rc.settle) // a measured pause, not synchronization: the startup's reconciles end

	pid := cmd.Process.Pid
	controlPlane := func() ([]int, error) { return childrenNamed(os.Getpid(), "etcd", "kube-apiserver") }
	cp, err := newCPUMeter(controlPlane)
	if err != nil {
		return err
	}
	var server *cpuMeter
	if l.dsn != "" {
		if server, err = newCPUMeter(restBackends(l.dsn)); err != nil {
			return err
		}
	}
	var scans0 int64
	if l.scans != nil {
		if scans0, err = l.scans(ctx); err != nil {
			return err
		}
	}
	u0, s0, err := procUserSys(pid)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(rc.window)
	if pprofAddr != "" {
		window := cpuProfile(pprofAddr, rc.window, profile+".pprof")
		defer func() { <-window }()
	}
	for time.Now().Before(deadline) {
		time.Sleep(min(5*time.Second, time.Until(deadline)))
		if server != nil {
			_ = server.sample() // backends come and go: sample while they run
		}
	}
	u1, s1, err := procUserSys(pid)
	if err != nil {
		return err
	}
	run.loadAvg = loadAvg()
	run.managerCPU = (u1 - u0) + (s1 - s0)
	if run.managerCPU > 0 {
		run.userShare = float64(u1-u0) / float64(run.managerCPU)
	}
	if run.controlPlane, err = cp.used(); err != nil {
		return err
	}
	if server != nil {
		if run.serverCPU, err = server.used(); err != nil {
			return err
		}
		// The statistics collector publishes a backend's counts when it
		// goes idle, within a second.
		time.Sleep(time.Second)
		scans1, err := l.scans(ctx)
		if err != nil {
			return err
		}
		run.scans = scans1 - scans0
	}
	return nil
}

// cpuProfile fetches a CPU profile of d from the pprof handlers at addr
// into path, in the background; the channel closes when it is written (a
// failure is printed: the profile is a diagnosis, not a figure).
func cpuProfile(addr string, d time.Duration, path string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: d + time.Minute}
		resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
		if err != nil {
			fmt.Printf("rest: profile %s: %v\n", path, err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			fmt.Printf("rest: profile %s: %v\n", path, err)
			return
		}
		fmt.Printf("rest: CPU profile %s\n", path)
	}()
	return done
}

// procUserSys is a process's user and system CPU time.
func procUserSys(pid int) (user, sys time.Duration, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var u, st int64
	if _, err := fmt.Sscan(f[11], &u); err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, 0, err
	}
	return time.Duration(u) * clockTick, time.Duration(st) * clockTick, nil
}

// restBackends finds the measured manager's PostgreSQL backends (its
// connections carry restApp).
func restBackends(dsn string) func() ([]int, error) {
	return func() ([]int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, restApp)
		if err != nil {
			return nil, err
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return nil, err
		}
		out := make([]int, len(pids))
		for i, p := range pids {
			out[i] = int(p)
		}
		return out, nil
	}
}

// createRestEndpoints creates the namespaces, a signing Secret in each
// (so that the manager does not generate 10,000 Secrets: the objects at
// rest are the endpoints) and the endpoints, from concurrent clients.
func createRestEndpoints(ctx context.Context, c client.Client, rc restConfig, url string) error {
	secret, err := signing.GenerateSecret()
	if err != nil {
		return err
	}
	for i := range rc.namespaces {
		ns := restNamespace(i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "signing", Namespace: ns}, Data: map[string][]byte{"signingSecret": secret.Reveal()}}
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= rc.endpoints {
					return
				}
				ep := &hookv1.WebhookEndpoint{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ep-%05d", i), Namespace: restNamespace(i % rc.namespaces)},
					Spec: hookv1.WebhookEndpointSpec{
						URL: url, EventTypes: []hookv1.EventTypePattern{"order.*"},
						SigningSecretRef: &hookv1.SecretKeyReference{Name: "signing"},
					},
				}
				if err := c.Create(ctx, ep); err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- fmt.Errorf("creating endpoint %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func restNamespace(i int) string { return fmt.Sprintf("rest-%02d", i) }

// waitAllReady waits until n endpoints are Ready for their generation.
func waitAllReady(ctx context.Context, c client.Client, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var list hookv1.WebhookEndpointList
		ready := 0
		if err := c.List(ctx, &list); err == nil {
			for i := range list.Items {
				ep := &list.Items[i]
				if cond := meta.FindStatusCondition(ep.Status.Conditions, hookv1.ConditionReady); cond != nil &&
					cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == ep.Generation {
					ready++
				}
			}
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d endpoints Ready after %s", ready, n, timeout)
		}
		time.Sleep(2 * time.Second)
	}
}

// writeRest writes the step's section when it ran alone on both stores,
// and prints it otherwise.
func writeRest(cfg config, r *results) error {
	return writeBothStores(cfg.out, "rest", cfg.rest.stores, restHeading, r.rest.markdown(r.machine))
}

func (r *restResults) markdown(machine string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n%s\n\n", restHeading)
	p("Machine: %s.\n\n", machine)
	p("The real manager (`cmd/`, SQLite or PostgreSQL ledger, etcd and kube-apiserver as test/e2e\n")
	p("starts them, the Deployment's `GOGC=400 GOMEMLIMIT=400MiB`) with %d WebhookEndpoints in %d\n", r.endpoints, r.namespaces)
	p("namespaces (one signing Secret per namespace, a loopback receiver), to which nothing is\n")
	p("published. Created from 32 concurrent clients in %s; all Ready %s after the first request.\n", r.created.Round(time.Second), r.readyIn.Round(time.Second))
	p("Each manager starts on a fresh ledger, registers every endpoint, settles, and is then\n")
	p("measured over %s: its CPU (utime+stime from /proc) in cores, the control plane's, and on\n", r.window)
	p("PostgreSQL the CPU of the manager's own backends and the table scans in its schema\n")
	p("(`pg_stat_user_tables`).\n\n")
	p("| store | manager | registered in | manager CPU | of it user | floor ≤ %.2f cores | control plane | PostgreSQL backends | table scans/s | load average |\n|---|---|---|---|---|---|---|---|---|---|\n", restFloor)
	for i := range r.runs {
		run := &r.runs[i]
		server, scans := "", ""
		if run.store == "postgres" {
			server = fmt.Sprintf("%.4f cores", run.cores(run.serverCPU, r.window))
			scans = fmt.Sprintf("%.1f", float64(run.scans)/r.window.Seconds())
		}
		cores := run.cores(run.managerCPU, r.window)
		// The floor is for 10,000: fewer endpoints say nothing of it (the
		// cost is not linear in them).
		floor := fmt.Sprintf("n/a (%d endpoints)", r.endpoints)
		if r.endpoints >= 10_000 {
			floor = verdict(cores <= restFloor)
		}
		p("| %s | %s | %s | %.4f cores | %.0f%% | %s | %.4f cores | %s | %s | %s |\n", run.store, run.build,
			run.registered.Round(time.Second), cores, 100*run.userShare, floor,
			run.cores(run.controlPlane, r.window), server, scans, run.loadAvg)
	}
	p("\nReproduce: `go run ./test/bench --steps rest` (with HOOKKEEPER_TEST_POSTGRES set for\n")
	p("PostgreSQL); `--rest-baseline BIN` measures another build of the manager first.\n")
	return b.String()
}
