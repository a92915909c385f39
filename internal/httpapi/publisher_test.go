package httpapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/groupcommit"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// gatedInserter reports each batch and holds it until released.
type gatedInserter struct {
	batches chan []*ledger.EventInsertParams
	release chan error
}

func (g *gatedInserter) EventInsertMany(_ context.Context, ps []*ledger.EventInsertParams) ([]ledger.EventInsertResult, error) {
	g.batches <- ps
	if err := <-g.release; err != nil {
		return nil, err
	}
	out := make([]ledger.EventInsertResult, len(ps))
	for i, p := range ps {
		out[i].Event = ledger.Event{ID: p.ID, Namespace: p.Namespace}
		if p.IdempotencyKey == "conflict" {
			out[i] = ledger.EventInsertResult{Err: fmt.Errorf("key: %w", ledger.ErrIdempotencyConflict)}
		}
	}
	return out, nil
}

func TestStorePublisher(t *testing.T) {
	g := &gatedInserter{batches: make(chan []*ledger.EventInsertParams, 10), release: make(chan error)}
	p := NewStorePublisher(g, groupcommit.Options{})
	type out struct {
		id  string
		res ledger.EventInsertResult
		err error
	}
	outs := make(chan out, 10)
	publish := func(id, key string) {
		go func() {
			res, err := p.Publish(context.Background(), &ledger.EventInsertParams{ID: id, IdempotencyKey: key})
			outs <- out{id, res, err}
		}()
	}
	publish("evt_first", "")
	if b := <-g.batches; len(b) != 1 {
		t.Fatalf("first batch has %d events", len(b))
	}
	// Three more, in however many batches (groupcommit's tests pin the
	// batching): each caller must get its own item's outcome.
	for i, key := range []string{"", "conflict", ""} {
		publish(fmt.Sprint("evt_", i), key)
	}
	g.release <- nil
	got := 0
	for got < 3 {
		b := <-g.batches
		got += len(b)
		g.release <- nil
	}
	var conflicts, ok int
	for range 4 {
		o := <-outs
		switch {
		case o.err != nil:
			t.Errorf("%s: %v", o.id, o.err)
		case errors.Is(o.res.Err, ledger.ErrIdempotencyConflict):
			conflicts++
		case o.res.Event.ID == o.id:
			ok++
		}
	}
	if conflicts != 1 || ok != 3 {
		t.Errorf("conflicts %d, ok %d: per-item errors must reach only their caller", conflicts, ok)
	}

	// A failed transaction fails every publish of the batch, wrapped.
	publish("evt_doomed", "")
	<-g.batches
	g.release <- errBackend
	if o := <-outs; !errors.Is(o.err, errBackend) {
		t.Errorf("batch failure = %v, want it wrapped", o.err)
	}

	p.Close()
	if _, err := p.Publish(context.Background(), &ledger.EventInsertParams{ID: "evt_late"}); !errors.Is(err, groupcommit.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
