package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/wire"
	"github.com/hookkeeper/hookkeeper/internal/wire/wiretest"
)

// The registration refuses every configuration the sender would refuse on
// each attempt (package wire's rules), stores nothing of it, and accepts
// the rest. The refusal happens before the store is asked, so one store
// is enough.
func TestRegisterEndpointRefusesWhatCannotBeSent(t *testing.T) {
	e := run(t, engine.Options{Store: stores()[0].open(t)})
	ctx := context.Background()
	p := policy(3, 0)
	n := 0
	register := func(url string, headers ...wire.Header) (string, error) {
		n++
		ep := endpoint(t, "wire", fmt.Sprintf("ep-%d", n), url, []string{"*"}, p)
		ep.Headers = headers
		_, err := e.RegisterEndpoint(ctx, ep)
		return ep.ID, err
	}
	refused := func(what string, id string, err, want error) {
		t.Helper()
		if !errors.Is(err, engine.ErrInvalidEndpoint) || !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
		if _, err := e.Endpoint(ctx, id); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: the refused endpoint is stored (%v)", what, err)
		}
	}

	for _, tc := range wiretest.URLCases {
		id, err := register(tc.URL)
		if tc.Want == nil {
			if err != nil {
				t.Errorf("url %q: %v", tc.URL, err)
			}
			continue
		}
		refused(fmt.Sprintf("url %q", tc.URL), id, err, tc.Want)
	}
	for _, tc := range wiretest.HeaderCases {
		id, err := register("https://example.com/hooks", wire.Header{Name: tc.Name, Value: tc.Value})
		if tc.Want == nil {
			if err != nil {
				t.Errorf("header %q: %v", tc.Name, err)
			}
			continue
		}
		refused(fmt.Sprintf("header %q: %q", tc.Name, tc.Value), id, err, tc.Want)
	}
	for _, name := range wire.ReservedHeaders {
		for _, c := range wiretest.Cases(name) {
			id, err := register("https://example.com/hooks", wire.Header{Name: "X-Tenant", Value: "a"}, wire.Header{Name: c, Value: "v"})
			refused("header "+c, id, err, wire.ErrHeaderReserved)
		}
	}
	id, err := register("https://example.com/hooks", wire.Header{Name: "X-Tenant", Value: "a"}, wire.Header{Name: "x-TENANT", Value: "b"})
	refused("a name repeated in another case", id, err, wire.ErrHeaderRepeated)
}
