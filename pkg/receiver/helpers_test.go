package receiver

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "modernc.org/sqlite"             // driver "sqlite"

	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// Two fixed secrets: the endpoint's current one and the previous one.
const (
	current  = "whsec_8S9NKD/M6fS0N5T33DNc4EgSVn6ypdXL"
	previous = "whsec_yxJ+q0+EcWXSMhbDFD6Po5a5g8YLYPjF"
	stranger = "whsec_DqCq9rEXqtz4MGZzT5c2ub/5ZKNk4hg7"
)

// t0 is the tests' now.
var t0 = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

// clock is a settable clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// openDB opens one of the two databases the package supports, empty and
// the test's own, closed when the test ends.
func openDB(t *testing.T, driver string) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	switch driver {
	case "sqlite":
		// The options the package documents: a busy timeout, so that
		// concurrent duplicates wait for the write lock.
		db, err = sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "receiver.db")+
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	case "postgres":
		// A schema of its own, through search_path, as the package's users
		// choose theirs.
		schema := pgtest.NewSchema(t)
		u, perr := url.Parse(pgtest.DSN(t))
		if perr != nil {
			t.Fatal(perr)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		db, err = sql.Open("pgx", u.String())
		if err == nil {
			_, err = db.Exec("CREATE SCHEMA IF NOT EXISTS " + schema)
		}
	default:
		t.Fatalf("unknown driver %s", driver)
	}
	if err != nil {
		t.Fatalf("open %s: %v", driver, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// bothDatabases runs f on SQLite and on PostgreSQL.
func bothDatabases(t *testing.T, f func(t *testing.T, db *sql.DB)) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			f(t, openDB(t, driver))
		})
	}
}

// newReceiver opens a Receiver on db with the test clock.
func newReceiver(t *testing.T, db *sql.DB, c *clock, opts Options) *Receiver {
	t.Helper()
	if opts.Secrets == nil {
		opts.Secrets = []string{current, previous}
	}
	opts.Now = c.Now
	r, err := New(context.Background(), db, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// delivery is one attempt as hookkeeper sends it.
type delivery struct {
	id, deliveryID string
	at             time.Time // webhook-timestamp
	body           []byte
	secrets        []string // signing secrets; current when empty
	replayUntil    string   // the header; absent when empty
}

func envelope(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"order.created","timestamp":"2026-03-04T09:59:00Z","data":{"order":7}}`, id)
}

// request builds the signed request of d.
func (d delivery) request(t testing.TB) *http.Request {
	t.Helper()
	if d.body == nil {
		d.body = envelope(d.id)
	}
	if d.secrets == nil {
		d.secrets = []string{current}
	}
	secrets := make([]sensitive.Bytes, len(d.secrets))
	for i, s := range d.secrets {
		secrets[i] = sensitive.Bytes(s)
	}
	sig, err := signing.SignatureHeader(secrets, d.id, d.at, d.body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(d.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signing.HeaderID, d.id)
	req.Header.Set(signing.HeaderTimestamp, strconv.FormatInt(d.at.Unix(), 10))
	req.Header.Set(signing.HeaderSignature, sig)
	if d.deliveryID != "" {
		req.Header.Set(DeliveryIDHeader, d.deliveryID)
	}
	if d.replayUntil != "" {
		req.Header.Set(ReplayUntilHeader, d.replayUntil)
	}
	return req
}

// effects is the handler's table: one row per effect.
const effectsTable = `CREATE TABLE IF NOT EXISTS effects (webhook_id VARCHAR(256) NOT NULL, n INTEGER NOT NULL)`

// insertEffect is a ProcessFunc that inserts one effect row through tx.
func insertEffect(ctx context.Context, tx *sql.Tx, ev *Event) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO effects (webhook_id, n) VALUES ($1, 1)`, ev.ID)
	return err
}

// countEffects counts the effects of one event.
func countEffects(t *testing.T, db *sql.DB, id string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM effects WHERE webhook_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// receive runs one delivery through Receive and returns the Result and
// the recorded answer.
func receive(t *testing.T, r *Receiver, d delivery, process ProcessFunc) (Result, *httptest.ResponseRecorder) {
	t.Helper()
	w := httptest.NewRecorder()
	res := r.Receive(w, d.request(t), process)
	if w.Code != res.Status {
		t.Fatalf("answered %d, Result.Status %d", w.Code, res.Status)
	}
	return res, w
}

// bodyOf is a request body.
func bodyOf(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

// del deletes a header of a request.
func del(name string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Del(name) }
}
