package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux the bench runs on).
const clockTick = 10 * time.Millisecond

// procCPU is the user plus system CPU time a process has used, from
// /proc/<pid>/stat (fields 14 and 15, after the parenthesised command).
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(data))
}

func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat without a command: %q", stat)
	}
	// After ")": state(3) ppid(4) ... utime(14) stime(15).
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat too short: %q", stat)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat utime/stime: %q %q", f[11], f[12])
	}
	return time.Duration(u+s) * clockTick, nil
}

func procPPID(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return strconv.Atoi(f[1])
}

// cpuMeter samples the CPU time of a set of processes. PIDs that appear
// between two samples count from zero (they started in the window); PIDs
// that vanish lose what they used since the last sample, which is why the
// PostgreSQL meter samples its backends while they still run.
type cpuMeter struct {
	pids    func() ([]int, error)
	last    map[int]time.Duration
	sum     time.Duration
	started bool
}

func newCPUMeter(pids func() ([]int, error)) (*cpuMeter, error) {
	m := &cpuMeter{pids: pids, last: map[int]time.Duration{}}
	return m, m.sample()
}

// sample adds what each process used since the last sample.
func (m *cpuMeter) sample() error {
	pids, err := m.pids()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		t, err := procCPU(pid)
		if err != nil {
			continue // exited meanwhile
		}
		prev, seen := m.last[pid]
		if seen {
			m.sum += t - prev
		} else if m.started {
			m.sum += t
		}
		m.last[pid] = t
	}
	m.started = true
	return nil
}

// used samples and returns the CPU time used since the meter started.
func (m *cpuMeter) used() (time.Duration, error) {
	err := m.sample()
	return m.sum, err
}

// onePID meters one process.
func onePID(pid int) func() ([]int, error) { return func() ([]int, error) { return []int{pid}, nil } }

// benchApp is the application_name of the engine's PostgreSQL connections:
// the server is shared with other tests, so its client backends are
// counted only when they serve the engine.
const benchApp = "hookkeeper-bench"

// engineDSN is the DSN the engine connects with: its connections carry
// benchApp as their application_name.
func engineDSN(dsn string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&application_name=" + benchApp
	}
	return dsn + "?application_name=" + benchApp
}

// postgresPIDs finds the PostgreSQL server processes doing the engine's
// work: the postmaster's children (through /proc) that are either the
// engine's client backends (application_name benchApp) or the server's
// own background processes (WAL writer, checkpointer, ...).
func postgresPIDs(dsn string) func() ([]int, error) {
	return func() ([]int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("connect to find the server's processes: %w", err)
		}
		defer conn.Close(ctx)
		var self int
		if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&self); err != nil {
			return nil, err
		}
		postmaster, err := procPPID(self)
		if err != nil {
			return nil, err
		}
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 OR backend_type <> 'client backend'`, benchApp)
		if err != nil {
			return nil, err
		}
		ours, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return nil, err
		}
		children, err := childrenOf(postmaster)
		if err != nil {
			return nil, err
		}
		var pids []int
		for _, pid := range ours {
			if children[int(pid)] {
				pids = append(pids, int(pid))
			}
		}
		return pids, nil
	}
}

func childrenOf(parent int) (map[int]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	kids := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := procPPID(pid); err == nil && ppid == parent {
			kids[pid] = true
		}
	}
	return kids, nil
}

// loadAvg is the 1-minute load average, recorded beside every figure: the
// machine is shared, and latency depends on what else runs.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:3], " ")
}

// everySecond runs f once a second until the returned stop is called; stop
// waits for a call in progress, so that f's work is complete once it
// returns. The cost and capacity steps sample PostgreSQL's backends with
// it while they run (see cpuMeter).
func everySecond(f func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(time.Second):
				f()
			}
		}
	}()
	return func() { close(quit); <-done }
}
