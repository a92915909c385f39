package httpapi

import (
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// IdempotencyKeyHeader carries the publisher's idempotency key;
// ReplayedHeader marks an answer that returns an earlier publish.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	ReplayedHeader       = "Idempotent-Replayed"
)

// PublishAnswer is the answer to a publish (201, or 200 on a replay): the
// event's identity and where it goes. Neither data nor secrets are echoed;
// GET the event for its data.
type PublishAnswer struct {
	ID          string            `json:"id"`
	Namespace   string            `json:"namespace"`
	Type        string            `json:"type"`
	Timestamp   time.Time         `json:"timestamp"`
	ReissueOf   string            `json:"reissueOf,omitempty"`
	SecretNames []string          `json:"secretNames"`
	Deliveries  []DeliverySummary `json:"deliveries"`
}

// DeliverySummary is one delivery of a published event. Endpoint is the
// WebhookEndpoint's name in the event's namespace.
type DeliverySummary struct {
	ID       string               `json:"id"`
	Endpoint string               `json:"endpoint"`
	State    ledger.DeliveryState `json:"state"`
}

// publish serves POST /v1/namespaces/{namespace}/events.
func (h *Handler) publish(w http.ResponseWriter, r *http.Request, ns string) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	raw, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	res, err := h.core.PublishJSON(r.Context(), ns, key, raw)
	if err != nil {
		return publishRefusal(err)
	}

	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
		w.Header().Set(ReplayedHeader, "true")
	}
	w.Header().Set("Location", "/v1/namespaces/"+ns+"/events/"+res.Event.ID)
	return writeJSON(w, status, publishAnswer(ns, &res))
}

func publishAnswer(ns string, res *ledger.EventInsertResult) PublishAnswer {
	ev := &res.Event
	a := PublishAnswer{
		ID:          ev.ID,
		Namespace:   ev.Namespace,
		Type:        ev.Type,
		Timestamp:   ev.CreatedAt.UTC(),
		ReissueOf:   ev.ReissueOf,
		SecretNames: nonNil(ev.SecretNames),
		Deliveries:  make([]DeliverySummary, 0, len(res.Deliveries)),
	}
	for _, d := range res.Deliveries {
		a.Deliveries = append(a.Deliveries, DeliverySummary{ID: d.ID, Endpoint: endpointName(ns, d.EndpointID), State: d.State})
	}
	return a
}

// checkJSONContentType accepts application/json, with charset utf-8 or
// none: the body is parsed as UTF-8 JSON and nothing else.
func checkJSONContentType(r *http.Request) error {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type",
			"Content-Type must be application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type",
			"the body must be UTF-8 (charset=utf-8 or no charset)")
	}
	return nil
}

func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(IdempotencyKeyHeader)
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", badRequest(CodeInvalidField, IdempotencyKeyHeader, "Idempotency-Key must be sent once")
	case !publish.ValidIdempotencyKey(vals[0]):
		return "", badRequest(CodeInvalidField, IdempotencyKeyHeader,
			"Idempotency-Key must be 1 to %d printable ASCII characters", publish.MaxIdempotencyKeyLength)
	}
	return vals[0], nil
}

// readBody reads at most MaxBodyBytes; a larger body is a 413 (and
// MaxBytesReader makes the server close the connection).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readLimited(w, r, h.cfg.MaxBodyBytes)
}

// readLimited reads at most limit bytes of the body; a larger one is a 413.
func readLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, bodyTooLarge(limit)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, bodyTooLarge(limit)
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			// The server's ReadTimeout: a client trickling its body.
			return nil, &apiError{status: http.StatusRequestTimeout, code: CodeRequestTimeout, cause: err,
				message: "the body did not arrive within the server's read timeout"}
		}
		return nil, &apiError{status: http.StatusBadRequest, code: CodeInvalidJSON, cause: err,
			message: "reading the body failed"}
	}
	return raw, nil
}

func bodyTooLarge(limit int64) *apiError {
	return newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "", "body exceeds %d bytes", limit)
}

// endpointName turns a ledger endpoint ID ("<ns>/<name>") into the name the
// API speaks.
var endpointName = publish.EndpointName

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
