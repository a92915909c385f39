package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// TestOneProcessPerLedger: the embedded ledger refuses a second opener and
// says what to do, and is free again once the first closes.
func TestOneProcessPerLedger(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	first, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(ctx, path)
	if !errors.Is(err, sqlite.ErrLedgerInUse) {
		t.Fatalf("a second Open while the first is open: %v, want ErrLedgerInUse", err)
	}
	for _, want := range []string{"one replica", "postgres://", fmt.Sprintf("pid %d", os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening after Close: %v", err)
	}
	_ = again.Close()
}
