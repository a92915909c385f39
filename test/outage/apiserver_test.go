package outage

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// apiServer is the suite's kube-apiserver process, which envtest runs as a
// child of the test process: the outage is SIGSTOP to it, the end of the
// outage SIGCONT. It is found by its PID only (never by name), and only
// this process is ever signalled.
type apiServer struct {
	pid  int
	host string // env.Config.Host, for the responsiveness probe

	mu      sync.Mutex
	stopped bool
}

// findAPIServer finds the kube-apiserver that envtest started for the
// suite: a child of this test process whose argv[0] is kube-apiserver and
// whose --secure-port is the port of host (env.Config.Host).
func findAPIServer(host string) (*apiServer, error) {
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's address %q: %w", host, err)
	}
	port := u.Port()
	if port == "" {
		return nil, fmt.Errorf("the API server's address %q has no port", host)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	self := os.Getpid()
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a kernel thread
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if filepath.Base(args[0]) != "kube-apiserver" || !hasSecurePort(args[1:], port) {
			continue
		}
		if ppid, _, err := procStat(pid); err != nil || ppid != self {
			continue // another suite's API server on a reused port, or gone
		}
		found = append(found, pid)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no kube-apiserver child of PID %d with --secure-port=%s in /proc", self, port)
	case 1:
		return &apiServer{pid: found[0], host: u.Scheme + "://" + u.Host}, nil
	default:
		return nil, fmt.Errorf("several kube-apiserver children of PID %d with --secure-port=%s: %v", self, port, found)
	}
}

func hasSecurePort(args []string, port string) bool {
	for i, a := range args {
		if a == "--secure-port="+port || (a == "--secure-port" && i+1 < len(args) && args[i+1] == port) {
			return true
		}
	}
	return false
}

// procStat returns the parent PID and the state letter of a process
// (/proc/<pid>/stat: "pid (comm) state ppid ...", comm may hold spaces and
// parentheses, hence the last ')').
func procStat(pid int) (ppid int, state byte, err error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no comm: %q", pid, raw)
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, raw)
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, fields[0][0], err
}

// state is the process's state letter: T (or t) while stopped.
func (a *apiServer) state() (byte, error) {
	_, s, err := procStat(a.pid)
	return s, err
}

// answers reports whether the API server answers an HTTP request within
// timeout (any status: the probe is anonymous).
func (a *apiServer) answers(timeout time.Duration) error {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		// A probe of liveness only: no credentials are sent.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the suite's own loopback API server
		DisableKeepAlives: true,
	}}
	resp, err := client.Get(a.host + "/livez")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// stop sends SIGSTOP and returns when the process is stopped (state T)
// and no longer answers; it returns the time of the signal, the outage's
// start. The caller defers resume.
func (a *apiServer) stop() time.Time {
	GinkgoHelper()
	a.mu.Lock()
	Expect(a.stopped).To(BeFalse(), "the API server is already stopped")
	Expect(a.answers(5*time.Second)).To(Succeed(), "the API server does not answer before the outage")
	start := time.Now()
	Expect(syscall.Kill(a.pid, syscall.SIGSTOP)).To(Succeed(), "SIGSTOP to kube-apiserver (PID %d)", a.pid)
	a.stopped = true
	a.mu.Unlock()
	Eventually(a.state).WithTimeout(5*time.Second).WithPolling(20*time.Millisecond).
		Should(Or(Equal(byte('T')), Equal(byte('t'))), "kube-apiserver (PID %d) stopped", a.pid)
	err := a.answers(2 * time.Second)
	Expect(err).To(HaveOccurred(), "kube-apiserver answers although stopped")
	var timeout interface{ Timeout() bool }
	Expect(errors.As(err, &timeout) && timeout.Timeout()).To(BeTrue(), "the stopped API server's probe fails by timing out, not %v", err)
	GinkgoWriter.Printf("%s kube-apiserver (PID %d) stopped (SIGSTOP); it does not answer\n", stamp(start), a.pid)
	return start
}

// isStopped reports whether the process is stopped now (from /proc, not
// from what this type did).
func (a *apiServer) isStopped() bool {
	s, err := a.state()
	return err == nil && (s == 'T' || s == 't')
}

// resume sends SIGCONT if the suite stopped the API server, and returns
// the time of the signal (the outage's end; zero when it was not
// stopped). It is idempotent and never fails the spec by itself, so that
// every cleanup and failure report may call it first; the caller checks
// that the API server answers again with waitAnswering.
func (a *apiServer) resume() time.Time {
	if a == nil {
		return time.Time{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.stopped {
		return time.Time{}
	}
	end := time.Now()
	if err := syscall.Kill(a.pid, syscall.SIGCONT); err != nil {
		GinkgoWriter.Printf("SIGCONT to kube-apiserver (PID %d): %v\n", a.pid, err)
		return end
	}
	a.stopped = false
	GinkgoWriter.Printf("%s kube-apiserver (PID %d) continued (SIGCONT)\n", stamp(end), a.pid)
	return end
}

// waitAnswering waits until the API server answers again after resume.
func (a *apiServer) waitAnswering() {
	GinkgoHelper()
	Eventually(func() error { return a.answers(2 * time.Second) }).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).
		Should(Succeed(), "kube-apiserver answers again after SIGCONT")
}

// stamp formats a time for the suite's timeline lines.
func stamp(t time.Time) string { return t.Format("15:04:05.000") }
