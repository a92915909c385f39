package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Read API. An object of another namespace answers exactly as a missing
// one (404), so that namespaces do not learn of each other's objects.

// Limits of the delivery list.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
	maxIDLength      = 128 // longer IDs are unknown without asking the store
)

// EventView is an event as the read API shows it: data included, secrets
// never; SecretNames and SecretsScrubbed say what it carried and whether
// the secrets are gone.
type EventView struct {
	ID              string          `json:"id"`
	Namespace       string          `json:"namespace"`
	Type            string          `json:"type"`
	Timestamp       time.Time       `json:"timestamp"`
	ReissueOf       string          `json:"reissueOf,omitempty"`
	IdempotencyKey  string          `json:"idempotencyKey,omitempty"`
	SecretNames     []string        `json:"secretNames"`
	SecretsScrubbed bool            `json:"secretsScrubbed"`
	SecretsScrubAt  *time.Time      `json:"secretsScrubAt,omitempty"`
	Data            json.RawMessage `json:"data"` // null once the payload retention expired
}

// DeliveryView is a delivery as the read API shows it.
type DeliveryView struct {
	ID             string               `json:"id"`
	Event          string               `json:"event"`
	Endpoint       string               `json:"endpoint"`
	Owner          string               `json:"owner,omitempty"` // the endpoint's spec.owner now
	State          ledger.DeliveryState `json:"state"`
	Attempts       int                  `json:"attempts"`
	DueAt          time.Time            `json:"dueAt"`
	FirstAttemptAt *time.Time           `json:"firstAttemptAt,omitempty"`
	LeaseUntil     *time.Time           `json:"leaseUntil,omitempty"`
	AckDeadline    *time.Time           `json:"ackDeadline,omitempty"`
	LastStatus     int                  `json:"lastStatus,omitempty"`
	LastError      string               `json:"lastError,omitempty"`
	ExhaustReason  ledger.ExhaustReason `json:"exhaustReason,omitempty"`
	Resolution     ledger.Resolution    `json:"resolution,omitempty"`
	TerminalAt     *time.Time           `json:"terminalAt,omitempty"`
	CreatedAt      time.Time            `json:"createdAt"`
}

// DeliveryList is a page of deliveries. NextAfter, when set, is the after
// parameter of the next page.
type DeliveryList struct {
	Items     []DeliveryView `json:"items"`
	NextAfter string         `json:"nextAfter,omitempty"`
}

// AttemptView is one attempt. Duration is a Go duration string; StatusCode
// is absent when no response arrived.
type AttemptView struct {
	Number          int       `json:"number"`
	StartedAt       time.Time `json:"startedAt"`
	Duration        string    `json:"duration"`
	StatusCode      int       `json:"statusCode,omitempty"`
	Error           string    `json:"error,omitempty"`
	ResponseExcerpt string    `json:"responseExcerpt,omitempty"`
}

// AttemptList is a delivery's attempts, in order.
type AttemptList struct {
	Items []AttemptView `json:"items"`
}

// getEvent serves GET /v1/namespaces/{namespace}/events/{id}.
func (h *Handler) getEvent(w http.ResponseWriter, r *http.Request, ns string) error {
	id := r.PathValue("id")
	ev, err := h.event(r, ns, id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, EventView{
		ID:              ev.ID,
		Namespace:       ev.Namespace,
		Type:            ev.Type,
		Timestamp:       ev.CreatedAt.UTC(),
		ReissueOf:       ev.ReissueOf,
		IdempotencyKey:  ev.IdempotencyKey,
		SecretNames:     nonNil(ev.SecretNames),
		SecretsScrubbed: len(ev.SecretNames) > 0 && len(ev.Secrets) == 0,
		SecretsScrubAt:  utc(ev.SecretsScrubAt),
		Data:            ev.Data,
	})
}

// getDelivery serves GET /v1/namespaces/{namespace}/deliveries/{id}.
func (h *Handler) getDelivery(w http.ResponseWriter, r *http.Request, ns string) error {
	d, err := h.delivery(r, ns, r.PathValue("id"))
	if err != nil {
		return err
	}
	owners, err := h.owners(r, []ledger.Delivery{d})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, deliveryView(ns, &d, owners))
}

// owners reads the owners of the endpoints of ds.
func (h *Handler) owners(r *http.Request, ds []ledger.Delivery) (map[string]string, error) {
	ids := make([]string, 0, len(ds))
	for i := range ds {
		ids = append(ids, ds[i].EndpointID)
	}
	slices.Sort(ids)
	owners, err := h.cfg.Reader.EndpointOwners(r.Context(), slices.Compact(ids))
	if err != nil {
		return nil, internalError(fmt.Errorf("reading endpoint owners: %w", err))
	}
	return owners, nil
}

// listAttempts serves GET /v1/namespaces/{namespace}/deliveries/{id}/attempts.
func (h *Handler) listAttempts(w http.ResponseWriter, r *http.Request, ns string) error {
	d, err := h.delivery(r, ns, r.PathValue("id"))
	if err != nil {
		return err
	}
	attempts, err := h.cfg.Reader.AttemptList(r.Context(), d.ID)
	if err != nil {
		return internalError(fmt.Errorf("listing attempts of %s: %w", d.ID, err))
	}
	out := AttemptList{Items: make([]AttemptView, 0, len(attempts))}
	for _, a := range attempts {
		out.Items = append(out.Items, AttemptView{
			Number:          a.Number,
			StartedAt:       a.StartedAt.UTC(),
			Duration:        a.Duration.String(),
			StatusCode:      a.StatusCode,
			Error:           a.Error,
			ResponseExcerpt: string(a.ResponseExcerpt), // invalid UTF-8 becomes U+FFFD
		})
	}
	return writeJSON(w, http.StatusOK, out)
}

// listDeliveries serves GET /v1/namespaces/{namespace}/deliveries with
// query parameters endpoint, event (at least one is required: the ledger
// lists by endpoint or event, and that is what keeps the list inside the
// namespace), state (repeated or comma-separated), resolution, after and
// limit.
func (h *Handler) listDeliveries(w http.ResponseWriter, r *http.Request, ns string) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest(CodeInvalidField, "", "the query string is malformed")
	}
	params, err := deliveryListParams(ns, q)
	if err != nil {
		return err
	}
	out := DeliveryList{Items: []DeliveryView{}}
	if params.EventID != "" {
		// The event must be of this namespace; if not, there is nothing
		// to list (and nothing to reveal).
		if _, err := h.event(r, ns, params.EventID); err != nil {
			if ae := asAPIError(err); ae.code == CodeNotFound {
				return writeJSON(w, http.StatusOK, out)
			}
			return err
		}
	}
	ds, err := h.cfg.Reader.DeliveryList(r.Context(), params)
	if err != nil {
		return internalError(fmt.Errorf("listing deliveries: %w", err))
	}
	owners, err := h.owners(r, ds)
	if err != nil {
		return err
	}
	for i := range ds {
		if inNamespace(ns, ds[i].EndpointID) { // defence in depth
			out.Items = append(out.Items, deliveryView(ns, &ds[i], owners))
		}
	}
	if len(ds) > 0 && len(ds) >= params.Limit {
		out.NextAfter = ds[len(ds)-1].ID
	}
	return writeJSON(w, http.StatusOK, out)
}

func deliveryListParams(ns string, q url.Values) (*ledger.DeliveryListParams, error) {
	known := []string{"endpoint", "event", "state", "resolution", "after", "limit"}
	if err := knownParams(q, known); err != nil {
		return nil, err
	}
	one := func(name string) (string, error) {
		switch v := q[name]; len(v) {
		case 0:
			return "", nil
		case 1:
			return v[0], nil
		default:
			return "", badRequest(CodeInvalidField, name, "query parameter %s must be given once", name)
		}
	}
	p := &ledger.DeliveryListParams{Limit: DefaultListLimit}
	endpoint, err := one("endpoint")
	if err != nil {
		return nil, err
	}
	if endpoint != "" {
		if !validObjectName(endpoint) {
			return nil, badRequest(CodeInvalidField, "endpoint", "endpoint must be a WebhookEndpoint name")
		}
		p.EndpointID = ledger.EndpointID(ns, endpoint)
	}
	if p.EventID, err = one("event"); err != nil {
		return nil, err
	}
	if p.EndpointID == "" && p.EventID == "" {
		return nil, badRequest(CodeInvalidField, "endpoint", "endpoint or event is required: deliveries are listed per endpoint or per event")
	}
	for _, v := range q["state"] {
		for s := range strings.SplitSeq(v, ",") {
			st := ledger.DeliveryState(strings.TrimSpace(s))
			if !slices.Contains(deliveryStates, st) {
				return nil, badRequest(CodeInvalidField, "state", "state must be one of %s", joined(deliveryStates))
			}
			if !slices.Contains(p.States, st) {
				p.States = append(p.States, st)
			}
		}
	}
	res, err := one("resolution")
	if err != nil {
		return nil, err
	}
	if p.Resolution = ledger.Resolution(res); res != "" && !slices.Contains(resolutions, p.Resolution) {
		return nil, badRequest(CodeInvalidField, "resolution", "resolution must be one of %s", joined(resolutions))
	}
	if p.AfterID, err = one("after"); err != nil {
		return nil, err
	}
	if len(p.AfterID) > maxIDLength {
		return nil, badRequest(CodeInvalidField, "after", "after must be a delivery ID")
	}
	limit, err := one("limit")
	if err != nil {
		return nil, err
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxListLimit {
			return nil, badRequest(CodeInvalidField, "limit", "limit must be an integer from 1 to %d", MaxListLimit)
		}
		p.Limit = n
	}
	return p, nil
}

var (
	deliveryStates = []ledger.DeliveryState{ledger.StateScheduled, ledger.StateInFlight, ledger.StateAwaitingAck,
		ledger.StateDelivered, ledger.StateExhausted, ledger.StateCancelled}
	resolutions = []ledger.Resolution{ledger.ResolutionUnresolved, ledger.ResolutionRetried,
		ledger.ResolutionReissued, ledger.ResolutionDismissed}
)

func joined[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// knownParams refuses the first unknown query parameter (sorted, so the
// answer is stable).
func knownParams(q url.Values, known []string) error {
	var unknown []string
	for k := range q {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return badRequest(CodeUnknownField, unknown[0], "unknown query parameter %q; known parameters are %s",
		unknown[0], strings.Join(known, ", "))
}

// event returns the event id of namespace ns, or a 404.
func (h *Handler) event(r *http.Request, ns, id string) (ledger.Event, error) {
	if id == "" || len(id) > maxIDLength {
		return ledger.Event{}, notFound("event", id)
	}
	ev, err := h.cfg.Reader.EventGet(r.Context(), id)
	switch {
	case errors.Is(err, ledger.ErrNotFound), err == nil && ev.Namespace != ns:
		return ledger.Event{}, notFound("event", id)
	case err != nil:
		return ledger.Event{}, internalError(fmt.Errorf("reading event %s: %w", id, err))
	}
	return ev, nil
}

// delivery returns the delivery id of namespace ns, or a 404.
func (h *Handler) delivery(r *http.Request, ns, id string) (ledger.Delivery, error) {
	if id == "" || len(id) > maxIDLength {
		return ledger.Delivery{}, notFound("delivery", id)
	}
	d, err := h.cfg.Reader.DeliveryGet(r.Context(), id)
	switch {
	case errors.Is(err, ledger.ErrNotFound), err == nil && !inNamespace(ns, d.EndpointID):
		return ledger.Delivery{}, notFound("delivery", id)
	case err != nil:
		return ledger.Delivery{}, internalError(fmt.Errorf("reading delivery %s: %w", id, err))
	}
	return d, nil
}

func inNamespace(ns, endpointID string) bool { return strings.HasPrefix(endpointID, ns+"/") }

func deliveryView(ns string, d *ledger.Delivery, owners map[string]string) DeliveryView {
	return DeliveryView{
		ID:             d.ID,
		Event:          d.EventID,
		Endpoint:       endpointName(ns, d.EndpointID),
		Owner:          owners[d.EndpointID],
		State:          d.State,
		Attempts:       d.Attempts,
		DueAt:          d.DueAt.UTC(),
		FirstAttemptAt: utc(d.FirstAttemptAt),
		LeaseUntil:     utc(d.LeaseUntil),
		AckDeadline:    utc(d.AckDeadline),
		LastStatus:     d.LastStatus,
		LastError:      d.LastError,
		ExhaustReason:  d.ExhaustReason,
		Resolution:     d.Resolution,
		TerminalAt:     utc(d.TerminalAt),
		CreatedAt:      d.CreatedAt.UTC(),
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
