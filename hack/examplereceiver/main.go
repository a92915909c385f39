// Command examplereceiver is a receiver built with pkg/receiver, as a
// newcomer would write one: a bookkeeping service that books each paid
// invoice once, in its own SQLite database, however many times hookkeeper
// delivers the event (a retry whose answer was lost, a DeliveryRecovery's
// Retry, a replay). `make demo` runs it.
//
//   - POST /invoices receives the webhooks: verified, de-duplicated on
//     webhook-id, one row in booked_invoices per event; a recognised
//     duplicate is logged "duplicate";
//   - GET /rows lists the booked rows with the record the package keeps of
//     each (until when: its Hookkeeper-Replay-Until).
//
// The endpoint's signing secret is read from --secret-file (whsec_...).
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"github.com/hookkeeper/hookkeeper/pkg/receiver"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18101", "listen address")
	dbPath := flag.String("db", "bookkeeping.db", "SQLite database file")
	secretFile := flag.String("secret-file", "bookkeeping.secret", "file holding the endpoint's whsec_ signing secret")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *dbPath, *secretFile); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr, dbPath, secretFile string) error {
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		return err
	}
	// The busy timeout lets concurrent copies of one event wait for each
	// other's transaction instead of failing.
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS booked_invoices (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		webhook_id TEXT NOT NULL, -- no UNIQUE: the package alone keeps it one row per event
		invoice INTEGER NOT NULL,
		amount TEXT NOT NULL,
		booked_at TEXT NOT NULL)`); err != nil {
		return err
	}
	rcv, err := receiver.New(ctx, db, receiver.Options{Secrets: []string{string(bytes.TrimSpace(secret))}})
	if err != nil {
		return err
	}
	go func() {
		_ = rcv.RunPruner(ctx, time.Minute, func(err error) { log.Printf("pruning: %v", err) })
	}()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /invoices", func(w http.ResponseWriter, r *http.Request) {
		res := rcv.Receive(w, r, book)
		switch {
		case res.Err != nil:
			log.Printf("refused %s: %d %v", res.WebhookID, res.Status, res.Err)
		case res.Duplicate:
			log.Printf("duplicate %s (delivery %s): already booked, kept until %s", res.WebhookID,
				r.Header.Get(receiver.DeliveryIDHeader), res.ReplayUntil.Format(time.RFC3339))
		default:
			log.Printf("processed %s (delivery %s): booked, kept until %s", res.WebhookID,
				r.Header.Get(receiver.DeliveryIDHeader), res.ReplayUntil.Format(time.RFC3339))
		}
	})
	mux.HandleFunc("GET /rows", func(w http.ResponseWriter, r *http.Request) {
		rows, err := bookedRows(r.Context(), db, rcv)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rows)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("bookkeeping receiver on %s, booking into %s", addr, dbPath)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// book is the effect: one row per paid invoice, written through the
// transaction that records the webhook-id.
func book(ctx context.Context, tx *sql.Tx, ev *receiver.Event) error {
	var paid struct {
		Invoice int    `json:"invoice"`
		Amount  string `json:"amount"`
	}
	if err := json.Unmarshal(ev.Data, &paid); err != nil || paid.Invoice == 0 {
		return receiver.Reject("not a paid invoice")
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO booked_invoices (webhook_id, invoice, amount, booked_at) VALUES ($1, $2, $3, $4)`,
		ev.ID, paid.Invoice, paid.Amount, time.Now().UTC().Format(time.RFC3339))
	return err
}

type bookedRow struct {
	WebhookID   string `json:"webhookID"`
	Invoice     int    `json:"invoice"`
	Amount      string `json:"amount"`
	BookedAt    string `json:"bookedAt"`
	ReplayUntil string `json:"recordKeptUntil,omitempty"`
}

func bookedRows(ctx context.Context, db *sql.DB, rcv *receiver.Receiver) ([]bookedRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT webhook_id, invoice, amount, booked_at FROM booked_invoices ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []bookedRow{}
	for rows.Next() {
		var b bookedRow
		if err := rows.Scan(&b.WebhookID, &b.Invoice, &b.Amount, &b.BookedAt); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if rec, found, err := rcv.Lookup(ctx, out[i].WebhookID); err == nil && found {
			out[i].ReplayUntil = rec.ReplayUntil.Format(time.RFC3339)
		}
	}
	return out, nil
}
