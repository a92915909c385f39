package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Read API: an adapter on the ledger's one read model (ledger.Browser),
// authorised as the aggregated API delivery.hookkeeper.dev authorises the
// same reads (docs/adr/0014). An object of another namespace answers
// exactly as a missing one (404), so that namespaces do not learn of each
// other's objects.

// Limits of the delivery list.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
	maxIDLength      = 128 // longer IDs are unknown without asking the store
)

// EventView is an event as the read API shows it: secrets never, data only
// to a caller who may get webhookevents/data (DataHidden says it was
// withheld); SecretNames and SecretsScrubbed say what it carried and
// whether the secrets are gone.
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
	Data            json.RawMessage `json:"data"` // null once the payload retention expired, or hidden
	DataHidden      bool            `json:"dataHidden,omitempty"`
	// ValidUntil is when the event stops being deliverable; TypeGeneration
	// the generation of the WebhookEventType that validated it.
	ValidUntil     *time.Time `json:"validUntil,omitempty"`
	TypeGeneration int64      `json:"typeGeneration,omitempty"`
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

// getEvent serves GET /v1/namespaces/{namespace}/events/{id}: the event as
// the aggregated API's get of a webhookevent shows it, its data only to a
// caller who may also get webhookevents/data in the namespace.
func (h *Handler) getEvent(w http.ResponseWriter, r *http.Request, ns string) error {
	id := r.PathValue("id")
	if id == "" || len(id) > maxIDLength {
		return notFound("event", id)
	}
	es, err := h.cfg.Reader.EventBrowse(r.Context(), &ledger.EventBrowseParams{ID: id, Namespace: ns, Limit: 1})
	if err != nil {
		return internalError(fmt.Errorf("reading event %s: %w", id, err))
	}
	if len(es) == 0 {
		return notFound("event", id)
	}
	ev := es[0]
	view := EventView{
		ID:              ev.ID,
		Namespace:       ev.Namespace,
		Type:            ev.Type,
		Timestamp:       ev.CreatedAt.UTC(),
		ReissueOf:       ev.ReissueOf,
		IdempotencyKey:  ev.IdempotencyKey,
		SecretNames:     nonNil(ev.SecretNames),
		SecretsScrubbed: len(ev.SecretNames) > 0 && ev.SecretsScrubAt != nil,
		SecretsScrubAt:  utc(ev.SecretsScrubAt),
		ValidUntil:      utc(ev.ValidUntil),
		TypeGeneration:  ev.TypeGeneration,
	}
	if len(ev.Data) > 0 {
		show, err := h.mayReadData(r, ns)
		if err != nil {
			return err
		}
		if show {
			view.Data = ev.Data
		} else {
			view.DataHidden = true
		}
	}
	return writeJSON(w, http.StatusOK, view)
}

// mayReadData asks the Auth whether the caller may get webhookevents/data
// in ns: the one permission both doors require for event data.
func (h *Handler) mayReadData(r *http.Request, ns string) (bool, error) {
	data := Access{Verb: VerbGet, APIGroup: HistoryGroup, Resource: ResourceWebhookEvents, Subresource: SubresourceData, Namespace: ns}
	decision, _, err := h.cfg.Auth.Authorize(r.Context(), data.attributes(userFrom(r.Context())))
	switch {
	case decision == authorizer.DecisionAllow:
		return true, nil
	case err != nil:
		return false, authError(err)
	default:
		return false, nil
	}
}

// getDelivery serves GET /v1/namespaces/{namespace}/deliveries/{id}.
func (h *Handler) getDelivery(w http.ResponseWriter, r *http.Request, ns string) error {
	d, err := h.delivery(r, ns, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, deliveryView(&d))
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
// query parameters endpoint, event, state (repeated or comma-separated),
// resolution, after and limit: a page of the namespace's deliveries in ID
// order, as the aggregated API lists them.
func (h *Handler) listDeliveries(w http.ResponseWriter, r *http.Request, ns string) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest(CodeInvalidField, "", "the query string is malformed")
	}
	params, err := deliveryListParams(ns, q)
	if err != nil {
		return err
	}
	ds, err := h.cfg.Reader.DeliveryBrowse(r.Context(), params)
	if err != nil {
		return internalError(fmt.Errorf("listing deliveries: %w", err))
	}
	out := DeliveryList{Items: make([]DeliveryView, 0, len(ds))}
	for i := range ds {
		out.Items = append(out.Items, deliveryView(&ds[i]))
	}
	if len(ds) > 0 && len(ds) >= params.Limit {
		out.NextAfter = ds[len(ds)-1].ID
	}
	return writeJSON(w, http.StatusOK, out)
}

func deliveryListParams(ns string, q url.Values) (*ledger.DeliveryBrowseParams, error) {
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
	p := &ledger.DeliveryBrowseParams{Namespace: ns, Limit: DefaultListLimit}
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

// delivery returns the delivery id of namespace ns, or a 404.
func (h *Handler) delivery(r *http.Request, ns, id string) (ledger.DeliveryView, error) {
	if id == "" || len(id) > maxIDLength {
		return ledger.DeliveryView{}, notFound("delivery", id)
	}
	ds, err := h.cfg.Reader.DeliveryBrowse(r.Context(), &ledger.DeliveryBrowseParams{ID: id, Namespace: ns, Limit: 1})
	if err != nil {
		return ledger.DeliveryView{}, internalError(fmt.Errorf("reading delivery %s: %w", id, err))
	}
	if len(ds) == 0 {
		return ledger.DeliveryView{}, notFound("delivery", id)
	}
	return ds[0], nil
}

func deliveryView(d *ledger.DeliveryView) DeliveryView {
	return DeliveryView{
		ID:             d.ID,
		Event:          d.EventID,
		Endpoint:       endpointName(d.Namespace, d.EndpointID),
		Owner:          d.EndpointOwner,
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
