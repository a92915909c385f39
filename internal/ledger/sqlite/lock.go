package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrLedgerInUse means another process has the ledger open. The embedded
// ledger has one writer: two engines on one file would each believe they
// own every lease. Several replicas need the PostgreSQL ledger.
var ErrLedgerInUse = errors.New("the SQLite ledger is in use by another process; it serves one replica: run several on the PostgreSQL ledger (--ledger=postgres://...)")

// processLock is an exclusive flock on <ledger>.lock, held while the store
// is open. The kernel releases it when the process dies, so a crash never
// leaves the ledger locked.
type processLock struct{ f *os.File }

func lockLedger(path string) (*processLock, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock ledger: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path + ".lock")
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if pid := strings.TrimSpace(string(holder)); pid != "" {
				return nil, fmt.Errorf("%w (held by pid %s)", ErrLedgerInUse, pid)
			}
			return nil, ErrLedgerInUse
		}
		return nil, fmt.Errorf("lock ledger: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &processLock{f: f}, nil
}

func (l *processLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close() // closing the descriptor releases the flock
}
