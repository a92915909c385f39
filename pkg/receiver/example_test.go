package receiver_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite"

	"github.com/hookkeeper/hookkeeper/pkg/receiver"
)

// The endpoint's signing secret, as its WebhookEndpoint's Secret holds it.
const secret = "whsec_8S9NKD/M6fS0N5T33DNc4EgSVn6ypdXL"

// A receiver of order events that records one row per order: a retried or
// replayed delivery of the same event leaves one row.
func Example() {
	ctx := context.Background()
	db, done := openSQLite("orders.db")
	defer done()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS orders (webhook_id VARCHAR(256) PRIMARY KEY, order_no INTEGER)`); err != nil {
		log.Fatal(err)
	}
	rcv, err := receiver.New(ctx, db, receiver.Options{Secrets: []string{secret}})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks", func(w http.ResponseWriter, r *http.Request) {
		res := rcv.Receive(w, r, func(ctx context.Context, tx *sql.Tx, ev *receiver.Event) error {
			var order struct {
				Order int `json:"order"`
			}
			if err := json.Unmarshal(ev.Data, &order); err != nil {
				return receiver.Reject("not an order")
			}
			// Through tx: the row and the de-duplication record commit
			// together.
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (webhook_id, order_no) VALUES ($1, $2)`, ev.ID, order.Order)
			return err
		})
		if res.Duplicate {
			fmt.Println("duplicate", res.WebhookID)
		}
	})

	// hookkeeper delivers the event, then a DeliveryRecovery retries it.
	for range 2 {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, signedDelivery("msg_2xYb", `{"id":"msg_2xYb","type":"order.created","timestamp":"2026-03-04T10:00:00Z","data":{"order":7}}`))
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))
	}
	var rows int
	_ = db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&rows)
	fmt.Println("orders:", rows)
	// Output:
	// 200 {"duplicate":false,"outcome":"processed"}
	// duplicate msg_2xYb
	// 200 {"duplicate":true,"outcome":"processed"}
	// orders: 1
}

// Records are kept until the Hookkeeper-Replay-Until of their delivery;
// Prune (or RunPruner in the background) deletes them afterwards.
func ExampleReceiver_Prune() {
	ctx := context.Background()
	db, done := openSQLite("prune.db")
	defer done()
	rcv, err := receiver.New(ctx, db, receiver.Options{Secrets: []string{secret}})
	if err != nil {
		log.Fatal(err)
	}
	until := time.Now().Add(7 * 24 * time.Hour).UTC().Truncate(time.Second)
	req := signedDelivery("msg_3kQ", `{"type":"order.paid","data":{}}`)
	req.Header.Set(receiver.ReplayUntilHeader, until.Format(time.RFC3339))
	rcv.Receive(httptest.NewRecorder(), req, func(context.Context, *sql.Tx, *receiver.Event) error { return nil })

	rec, _, _ := rcv.Lookup(ctx, "msg_3kQ")
	fmt.Println("kept until the header says:", rec.ReplayUntil.Equal(until))
	n, _ := rcv.Prune(ctx, until)
	fmt.Println("pruned at replay-until:", n)
	n, _ = rcv.Prune(ctx, until.Add(time.Second))
	fmt.Println("pruned after it:", n)
	// Output:
	// kept until the header says: true
	// pruned at replay-until: 0
	// pruned after it: 1
}

// A receiver that decides later, for an endpoint in acknowledgement mode
// Callback, posts its outcome with the Event's DeliveryID. (With
// Options.Acknowledger, Receive posts it itself.)
func ExampleAcknowledger() {
	// hookkeeper's API, played here by a server that prints what it gets.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println(r.Method, r.URL.Path, r.Header.Get("webhook-signature") != "")
		fmt.Println(string(body))
		_, _ = io.WriteString(w, `{"deliveryID":"dlv_9","state":"exhausted","reason":"AckRejected"}`)
	}))
	defer api.Close()

	ack := &receiver.Acknowledger{APIURL: api.URL, Secret: secret}
	if err := ack.Acknowledge(context.Background(), "dlv_9", receiver.Rejected, "customer already refunded"); err != nil {
		log.Fatal(err)
	}
	// Output:
	// POST /v1/acks/dlv_9 true
	// {"deliveryID":"dlv_9","outcome":"rejected","reason":"customer already refunded"}
}

// openSQLite opens a SQLite database in a temporary directory, with the
// busy timeout the package asks for; done closes and removes it.
func openSQLite(name string) (db *sql.DB, done func()) {
	dir, err := os.MkdirTemp("", "receiver-example-")
	if err != nil {
		log.Fatal(err)
	}
	db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, name)+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { _ = db.Close(); _ = os.RemoveAll(dir) }
}

// signedDelivery is a request as hookkeeper sends it: the Standard Webhooks
// signature is base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")).
func signedDelivery(id, body string) *http.Request {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))
	req := httptest.NewRequest(http.MethodPost, "/webhooks", strings.NewReader(body))
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return req
}
