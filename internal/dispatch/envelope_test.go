package dispatch_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

type envelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

func baseRequest() dispatch.Request {
	return dispatch.Request{
		EventID:   "evt_01hq3k8d5r6s7t8v9w0x1y2z3a",
		EventType: "user.created",
		EventTime: time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.FixedZone("CET", 3600)),
		Data:      json.RawMessage(`{"user": {"id": 7, "name": "Zoë"}, "list": [1, 2]}`),
	}
}

func TestEnvelope(t *testing.T) {
	got, err := dispatch.Envelope(baseRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"evt_01hq3k8d5r6s7t8v9w0x1y2z3a","type":"user.created","timestamp":"2026-03-04T04:06:07.89Z","data":{"user":{"id":7,"name":"Zoë"},"list":[1,2]}}`
	if string(got) != want {
		t.Fatalf("envelope\n got %s\nwant %s", got, want)
	}
}

func TestEnvelopeData(t *testing.T) {
	tests := []struct {
		name          string
		data, secrets string
		want          string // data as sent
	}{
		{"no data", "", "", `{}`},
		{"null data", "null", "", `{}`},
		{"empty object", " {} ", "", `{}`},
		{"null secrets", `{"a":1}`, "null", `{"a":1}`},
		{"empty secrets", `{"a":1}`, " { } ", `{"a":1}`},
		{"secrets merged after data", `{"a": 1, "b": {"c": [true]}}`, `{"confirm": "tok-123", "recovery": {"code": "x y"}}`,
			`{"a":1,"b":{"c":[true]},"confirm":"tok-123","recovery":{"code":"x y"}}`},
		{"secrets into empty data", `{}`, `{"confirm":"tok-123"}`, `{"confirm":"tok-123"}`},
		{"secrets into no data", ``, `{"confirm":"tok-123"}`, `{"confirm":"tok-123"}`},
		{"escaped keys that differ", `{"a\"b":1}`, `{"a\\b":2}`, `{"a\"b":1,"a\\b":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := baseRequest()
			req.Data = json.RawMessage(tt.data)
			if tt.secrets != "" {
				req.Secrets = sensitive.Bytes(tt.secrets)
			}
			got, err := dispatch.Envelope(req)
			if err != nil {
				t.Fatal(err)
			}
			var env envelope
			if err := json.Unmarshal(got, &env); err != nil {
				t.Fatalf("envelope %s is not JSON: %v", got, err)
			}
			if string(env.Data) != tt.want {
				t.Errorf("data %s, want %s", env.Data, tt.want)
			}
		})
	}
}

func TestEnvelopeEscapesStrings(t *testing.T) {
	req := baseRequest()
	req.EventID = `evt_"quoted"\<tag>&`
	req.EventType = "type\twith\u2028controls\x01"
	got, err := dispatch.Envelope(req)
	if err != nil {
		t.Fatal(err)
	}
	var env envelope
	if err := json.Unmarshal(got, &env); err != nil {
		t.Fatalf("envelope %s is not JSON: %v", got, err)
	}
	if env.ID != req.EventID || env.Type != req.EventType {
		t.Errorf("id %q type %q, want %q %q", env.ID, env.Type, req.EventID, req.EventType)
	}
}

func TestEnvelopeRejects(t *testing.T) {
	const secret = "tok-SUPERSECRET"
	tests := []struct {
		name    string
		mutate  func(*dispatch.Request)
		wantErr error
	}{
		{name: "no id", mutate: func(r *dispatch.Request) { r.EventID = "" }},
		{name: "no type", mutate: func(r *dispatch.Request) { r.EventType = "" }},
		{name: "no time", mutate: func(r *dispatch.Request) { r.EventTime = time.Time{} }},
		{name: "data is an array", mutate: func(r *dispatch.Request) { r.Data = json.RawMessage(`[1]`) }},
		{name: "data is a string", mutate: func(r *dispatch.Request) { r.Data = json.RawMessage(`"x"`) }},
		{name: "data is not JSON", mutate: func(r *dispatch.Request) { r.Data = json.RawMessage(`{"a":}`) }},
		{name: "data has trailing garbage", mutate: func(r *dispatch.Request) { r.Data = json.RawMessage(`{"a":1} {}`) }},
		{name: "data is not UTF-8", mutate: func(r *dispatch.Request) { r.Data = json.RawMessage("{\"a\":\"\xff\"}") }},
		{name: "secrets are an array", mutate: func(r *dispatch.Request) { r.Secrets = sensitive.Bytes(`["` + secret + `"]`) }},
		{name: "secrets are not JSON", mutate: func(r *dispatch.Request) { r.Secrets = sensitive.Bytes(`{"confirm": ` + secret + `}`) }},
		{name: "secrets have trailing garbage", mutate: func(r *dispatch.Request) { r.Secrets = sensitive.Bytes(`{"confirm":"x"} ` + secret) }},
		{name: "secrets are not UTF-8", mutate: func(r *dispatch.Request) { r.Secrets = sensitive.Bytes("{\"confirm\":\"" + secret + "\xff\"}") }},
		{name: "secret collides with data", wantErr: dispatch.ErrKeyCollision,
			mutate: func(r *dispatch.Request) { r.Secrets = sensitive.Bytes(`{"list":"` + secret + `"}`) }},
		{name: "escaped secret name collides", wantErr: dispatch.ErrKeyCollision,
			mutate: func(r *dispatch.Request) { r.Secrets = sensitive.Bytes(`{"li\u0073t":"` + secret + `"}`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := baseRequest()
			tt.mutate(&req)
			got, err := dispatch.Envelope(req)
			if err == nil {
				t.Fatalf("accepted: %s", got)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "SUPERSECRET") {
				t.Errorf("error %q quotes a secret", err)
			}
		})
	}
}
