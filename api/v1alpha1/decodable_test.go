package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// This file proves, for every duration, date-time and integer field of every
// kind, that what the API server accepts the operator's Go types decode: one
// object the Go types cannot decode fails the list and watch of its kind in
// every namespace. The fields come from the generated CRD schemas and the
// cases from each field's schema (the bounds in its rules, minimum and
// maximum) plus the values known to overflow or to trip Go's RFC 3339
// parser, so a field added later is covered without touching this file.

// leaf is one scalar field of a CRD schema whose Go type can fail to decode.
type leaf struct {
	kind   string
	path   []string // JSON names; "[]" is an element of a list
	class  string   // duration, date-time or integer
	schema map[string]any
	rules  []string // CEL rules on the field and on its list
}

func (l leaf) String() string { return l.kind + " " + strings.Join(l.path, ".") }

func (l leaf) status() bool { return l.path[0] == "status" }

// foreignTimes are the fields whose schema hookkeeper does not write:
// metav1.Condition's. For them the lenient decoding must name the field
// instead (see decode.go).
func (l leaf) foreign() bool {
	return slices.Contains(l.path, "conditions") && l.path[len(l.path)-1] == "lastTransitionTime"
}

var (
	durationType = reflect.TypeFor[metav1.Duration]()
	timeType     = reflect.TypeFor[metav1.Time]()
	kinds        = map[string]reflect.Type{
		"RetryPolicy":      reflect.TypeFor[hookv1.RetryPolicy](),
		"WebhookEndpoint":  reflect.TypeFor[hookv1.WebhookEndpoint](),
		"DeliveryRecovery": reflect.TypeFor[hookv1.DeliveryRecovery](),
		"WebhookEventType": reflect.TypeFor[hookv1.WebhookEventType](),
		"WebhookQuota":     reflect.TypeFor[hookv1.WebhookQuota](),
	}
)

// schemaLeaves walks every CRD in config/crd/bases alongside its Go type and
// returns the fields whose Go type is a duration, a time or an integer.
func schemaLeaves() []leaf {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).To(HaveLen(len(kinds)))
	var leaves []leaf
	for _, f := range files {
		data, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		var crd struct {
			Spec struct {
				Names    struct{ Kind string }
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					}
				}
			}
		}
		Expect(yaml.Unmarshal(data, &crd)).To(Succeed(), f)
		kind := crd.Spec.Names.Kind
		goType, ok := kinds[kind]
		Expect(ok).To(BeTrue(), "no Go type for CRD kind %s", kind)
		props, _ := crd.Spec.Versions[0].Schema.OpenAPIV3Schema["properties"].(map[string]any)
		for _, top := range []string{"spec", "status"} {
			sub, _ := props[top].(map[string]any)
			Expect(sub).NotTo(BeNil(), "%s has no %s", kind, top)
			walkSchema(kind, []string{top}, sub, goField(goType, top), nil, &leaves)
		}
	}
	return leaves
}

func walkSchema(kind string, path []string, s map[string]any, t reflect.Type, listRules []string, out *[]leaf) {
	Expect(t).NotTo(BeNil(), "%s %s is in the schema but not in the Go type", kind, strings.Join(path, "."))
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	rules := listRules
	for _, r := range asList(s["x-kubernetes-validations"]) {
		rules = append(rules, r.(map[string]any)["rule"].(string))
	}
	class := ""
	switch {
	case t == durationType:
		class = "duration"
	case t == timeType:
		class = "date-time"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		class = "integer"
	}
	if class != "" {
		*out = append(*out, leaf{kind: kind, path: slices.Clone(path), class: class, schema: s, rules: rules})
		return
	}
	switch s["type"] {
	case "object":
		props, _ := s["properties"].(map[string]any)
		for name, sub := range props {
			walkSchema(kind, append(path, name), sub.(map[string]any), goField(t, name), nil, out)
		}
	case "array":
		walkSchema(kind, append(path, "[]"), s["items"].(map[string]any), t.Elem(), rules, out)
	}
}

// goField is the type of the field with JSON name name in struct t,
// looking into inlined structs; nil when there is none.
func goField(t reflect.Type, name string) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f.Type
		}
		if tag == "" && f.Anonymous {
			if ft := goField(f.Type, name); ft != nil {
				return ft
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// durationLiteral finds the bounds a rule compares with: duration('8760h').
var durationLiteral = regexp.MustCompile(`duration\('([^']+)'\)`)

// cases are the values tried for a field: its schema's bounds and the values
// around them, and the values that overflow or that only some parsers take.
func cases(l leaf) []any {
	switch l.class {
	case "duration":
		values := []any{
			"0s", "1ns", "1s", "1h", "1.5h", "1h30m", "0.000000001s",
			// Case and unit variants.
			"1H", "1S", "1Ms", "1MS", "1µs", "1us", "-1s", "+1s", "1d",
			// The largest time.Duration and just past it.
			"2562047h", "2562048h", "2562047h47m16.854775807s", "2562047h47m16.854775808s",
			"9223372036854775807ns", "9223372036854775808ns", "9999999999h", "99999999999999999999ns",
		}
		for _, r := range l.rules {
			for _, m := range durationLiteral.FindAllStringSubmatch(r, -1) {
				d, err := time.ParseDuration(m[1])
				Expect(err).NotTo(HaveOccurred(), "rule %q", r)
				values = append(values, m[1], (d + 1).String(), (d - 1).String())
			}
		}
		return values
	case "date-time":
		return []any{
			"2024-01-01T00:00:00Z", "2024-01-01T00:00:00.123456789Z", "2024-01-01T00:00:00.1234567890Z",
			"2024-01-01T00:00:00+01:00", "2024-01-01T00:00:00-00:00", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
			// Case variants and other separators.
			"2024-01-01t00:00:00Z", "2024-01-01T00:00:00z", "2024-01-01t00:00:00z", "2024-01-01 00:00:00Z",
			"2024-01-01T00:00:00,5Z", "2024-01-01T00:00:00x5Z", "2024-01-01T00:00:00:5Z",
			// Out of range parts.
			"2024-01-01T23:59:60Z", "2024-01-01T24:00:00Z", "2024-02-30T00:00:00Z", "2024-01-01T00:00:00+24:00",
			"2024-01-01T00:00:00+99:99", "2024-01-01T00:00:00+01:60",
			// Reduced or missing parts.
			"2024-01-01T00:00:00", "2024-01-01T00:00Z", "2024-01-01T00:00", "2024-01-01 00:00:00", "2024-01-01",
			"2024-01-01T00:00:00+0100", "2024-01-01T00:00:00.000+0100", "2024-01-01T00:00:00.000000+0100",
		}
	default:
		values := []any{int64(0), int64(1), int64(-1),
			int64(math.MaxInt32), int64(math.MaxInt32) + 1, int64(math.MinInt32), int64(math.MinInt32) - 1,
			int64(math.MaxInt64), int64(math.MinInt64), float64(1 << 63), float64(1e20), float64(-1e20)}
		for _, bound := range []string{"minimum", "maximum"} {
			if b, ok := l.schema[bound]; ok {
				n := toInt64(b)
				values = append(values, n, n-1, n+1)
			}
		}
		return values
	}
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case json.Number:
		i, err := n.Int64()
		Expect(err).NotTo(HaveOccurred())
		return i
	}
	Fail(fmt.Sprintf("bound %v (%T) is not a number", v, v))
	return 0
}

// fixtures are valid objects of each kind, with one element in every list
// of objects, so that any field can be set on one of them. A field constrained
// by another (maxAge by replayWindow, say) is tried on every fixture of its
// kind.
var fixtures = map[string][]string{
	"RetryPolicy": {`
spec:
  backoff: {strategy: Exponential, initialDelay: 1s}
  horizon: {maxAttempts: 3}
  replayWindow: 8760h
  retention: {evidence: 8760h}
  retryBudget: {ratioPercent: 10}
`, `
spec:
  backoff: {strategy: Schedule, schedule: [1s]}
  horizon: {maxAttempts: 3}
  replayWindow: 8760h
  retention: {evidence: 8760h}
`, `
spec:
  backoff: {strategy: Linear, initialDelay: 1ns}
  horizon: {maxAge: 1ns}
  replayWindow: 1ns
  retention: {payloads: 0s, evidence: 1ns}
`},
	"WebhookEndpoint": {`
spec:
  url: http://127.0.0.1:1/hooks
  eventTypes: [a]
  acknowledgement: {mode: Callback}
  rateLimit: {perSecond: 1}
`},
	"DeliveryRecovery": {`
spec:
  endpointRef: {name: e}
  action: Dismiss
`, `
spec:
  endpointRef: {name: e}
  action: Replay
  replay: {since: "2024-01-01T00:00:00Z", eventTypes: [a]}
`},
	"WebhookEventType": {`
spec:
  type: a
  validFor: 1h
`},
	"WebhookQuota": {`
spec:
  hard: {publishesPerSecond: 1, publishBurst: 1, eventsPerDay: 1, payloadBytesRetained: 1Ki}
`},
}

// statusFixtures are valid statuses of each kind, written after create.
var statusFixtures = map[string]string{
	"RetryPolicy": `
status:
  conditions: [{type: Ready, status: "True", reason: R, message: m, lastTransitionTime: "2024-01-01T00:00:00Z"}]
  evidence:
    last24h: {settled: 1, recoveredByAttempt: [{attempt: 2, count: 1}], exhaustedByReason: [{reason: Gone, count: 1}]}
    last7d: {settled: 1, recoveredByAttempt: [{attempt: 2, count: 1}], exhaustedByReason: [{reason: Gone, count: 1}]}
`,
	"WebhookEndpoint": `
status:
  conditions: [{type: Ready, status: "True", reason: R, message: m, lastTransitionTime: "2024-01-01T00:00:00Z"}]
  recentExhausted: [{deliveryID: d, eventID: e, eventType: t, attempts: 1, reason: MaxAttempts, exhaustedAt: "2024-01-01T00:00:00Z", recovery: Retry}]
  breaker: {state: Open}
  evidence:
    last24h: {settled: 1, recoveredByAttempt: [{attempt: 2, count: 1}], exhaustedByReason: [{reason: Gone, count: 1}]}
    last7d: {settled: 1, recoveredByAttempt: [{attempt: 2, count: 1}], exhaustedByReason: [{reason: Gone, count: 1}]}
`,
	"DeliveryRecovery": `
status:
  conditions: [{type: Complete, status: "True", reason: R, message: m, lastTransitionTime: "2024-01-01T00:00:00Z"}]
  items: [{deliveryID: d, eventID: e, outcome: Pending}]
`,
	"WebhookEventType": `
status:
  conditions: [{type: Ready, status: "True", reason: R, message: m, lastTransitionTime: "2024-01-01T00:00:00Z"}]
  schema: None
  endpoints: 1
`,
	"WebhookQuota": `
status:
  conditions: [{type: Ready, status: "True", reason: R, message: m, lastTransitionTime: "2024-01-01T00:00:00Z"}]
  used: {eventsPerDay: 1, payloadBytesRetained: 1Ki, refusedToday: 0}
  updatedAt: "2024-01-01T00:00:00Z"
`,
}

func fixture(kind, manifest string) map[string]any {
	obj := map[string]any{}
	Expect(yaml.Unmarshal([]byte(manifest), &obj)).To(Succeed())
	obj["apiVersion"] = hookv1.GroupVersion.String()
	obj["kind"] = kind
	return obj
}

// setPath sets value at path in obj, creating missing objects and taking
// the first element of lists (a missing list gets one element).
func setPath(obj map[string]any, path []string, value any) {
	name, rest := path[0], path[1:]
	if len(rest) == 0 {
		obj[name] = value
		return
	}
	if rest[0] != "[]" {
		next, ok := obj[name].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[name] = next
		}
		setPath(next, rest, value)
		return
	}
	list := asList(obj[name])
	if len(list) == 0 {
		list = []any{map[string]any{}}
	}
	obj[name] = list
	if len(rest) == 1 {
		list[0] = value
		return
	}
	setPath(list[0].(map[string]any), rest[1:], value)
}

// outcome is what happened to one case.
type outcome struct {
	accepted   bool
	decodeErr  string // set when accepted but the Go types could not decode it
	undecoded  []string
	value      any
	fixtureIdx int
}

// typedDecode decodes the object the API server stored into the Go type the
// way the operator's clients do, and returns what could not be decoded.
func typedDecode(kind string, stored map[string]any) (undecodable []string, err error) {
	data, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	obj := reflect.New(kinds[kind]).Interface()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, err
	}
	return reflect.ValueOf(obj).Elem().FieldByName("Undecodable").Interface().([]string), nil
}

var _ = Describe("the CRD schemas admit only what the Go types decode", Ordered, func() {
	var (
		ns       string
		leaves   []leaf
		outcomes = map[string][]outcome{}
		created  int
	)

	BeforeAll(func() {
		ns = newNamespace()
		leaves = schemaLeaves()
	})

	It("finds every duration, date-time and integer field in the schemas", func() {
		var names []string
		for _, l := range leaves {
			names = append(names, l.String())
		}
		// A sample of fields that must be there; the walk covers all.
		Expect(names).To(ContainElements(
			"RetryPolicy spec.replayWindow", "RetryPolicy spec.backoff.schedule.[]",
			"RetryPolicy spec.retention.evidence", "RetryPolicy spec.horizon.maxAttempts",
			"WebhookEndpoint spec.acknowledgement.timeout", "WebhookEndpoint status.recentExhausted.[].exhaustedAt",
			"DeliveryRecovery spec.selector.exhaustedAfter", "DeliveryRecovery spec.ttlSecondsAfterFinished",
			"DeliveryRecovery status.counts.matched", "DeliveryRecovery status.conditions.[].lastTransitionTime",
		))
		GinkgoWriter.Printf("%d fields: %s\n", len(names), strings.Join(names, ", "))
	})

	It("decodes every value the API server accepts, for every field", func() {
		for _, l := range leaves {
			for _, value := range cases(l) {
				for fi, manifest := range fixtures[l.kind] {
					obj := fixture(l.kind, manifest)
					name := fmt.Sprintf("c%d", created)
					created++
					obj["metadata"] = map[string]any{"name": name, "namespace": ns}
					if l.kind == "WebhookQuota" {
						// One per namespace, named default.
						obj["metadata"] = map[string]any{"name": hookv1.WebhookQuotaName, "namespace": newNamespace()}
					}
					if l.status() {
						delete(obj, "status")
					} else {
						setPath(obj, slices.Clone(l.path), value)
					}
					u := &unstructured.Unstructured{Object: obj}
					err := k8sClient.Create(ctx, u)
					if l.status() {
						Expect(err).NotTo(HaveOccurred(), "the %s fixture", l.kind)
						st := fixture(l.kind, statusFixtures[l.kind])["status"].(map[string]any)
						u.Object["status"] = st
						setPath(u.Object, slices.Clone(l.path), value)
						err = k8sClient.Status().Update(ctx, u)
					}
					o := outcome{accepted: err == nil, value: value, fixtureIdx: fi}
					if o.accepted {
						o.undecoded, err = typedDecode(l.kind, u.Object)
						if err != nil {
							o.decodeErr = err.Error()
						}
					}
					outcomes[l.String()] = append(outcomes[l.String()], o)
					if o.accepted {
						break // decoding a value does not depend on the rest
					}
				}
			}
		}

		var broken, unexercised []string
		for _, l := range leaves {
			accepted := 0
			for _, o := range outcomes[l.String()] {
				if !o.accepted {
					continue
				}
				accepted++
				switch {
				case o.decodeErr != "":
					broken = append(broken, fmt.Sprintf("%s = %#v (fixture %d): accepted, fails to decode: %s", l, o.value, o.fixtureIdx, o.decodeErr))
				case len(o.undecoded) > 0 && !l.foreign():
					broken = append(broken, fmt.Sprintf("%s = %#v (fixture %d): accepted, the Go types cannot decode it: %s", l, o.value, o.fixtureIdx, strings.Join(o.undecoded, "; ")))
				case len(o.undecoded) > 0:
					// metav1.Condition's schema is not ours: the lenient
					// decoding must name exactly this field.
					Expect(o.undecoded).To(HaveExactElements(HavePrefix("status.conditions[0].lastTransitionTime: ")), "%s = %#v", l, o.value)
				}
			}
			if accepted == 0 {
				unexercised = append(unexercised, l.String())
			}
		}
		Expect(unexercised).To(BeEmpty(), "no case of these fields was accepted: the fixtures cannot exercise them")
		AddReportEntry("accepted values the Go types cannot decode", len(broken))
		Expect(broken).To(BeEmpty(), "%d accepted values do not decode:\n%s", len(broken), strings.Join(broken, "\n"))
	})

	It("lists every kind through the typed client with every accepted object decoded", func() {
		lists := []client.ObjectList{&hookv1.RetryPolicyList{}, &hookv1.WebhookEndpointList{}, &hookv1.DeliveryRecoveryList{}}
		for _, list := range lists {
			Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var undecodable []string
			switch l := list.(type) {
			case *hookv1.RetryPolicyList:
				Expect(l.Items).NotTo(BeEmpty())
				for _, it := range l.Items {
					undecodable = append(undecodable, it.Undecodable...)
				}
			case *hookv1.WebhookEndpointList:
				Expect(l.Items).NotTo(BeEmpty())
				for _, it := range l.Items {
					undecodable = append(undecodable, it.Undecodable...)
				}
			case *hookv1.DeliveryRecoveryList:
				Expect(l.Items).NotTo(BeEmpty())
				for _, it := range l.Items {
					undecodable = append(undecodable, it.Undecodable...)
				}
			}
			for _, u := range undecodable {
				Expect(u).To(HavePrefix("status.conditions[0].lastTransitionTime: "), "%T", list)
			}
		}
	})
})
