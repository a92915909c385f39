package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/catalog"
)

const orderSchema = `{"type": "object", "required": ["amount", "currency"], "properties": {
  "amount": {"type": "number", "minimum": 0},
  "currency": {"type": "string", "enum": ["EUR", "USD"]},
  "placedAt": {"type": "string", "format": "date-time"}}}`

// eventTypes are a namespace's catalog as the controller left it: one
// Ready with a schema, one whose schema is invalid, one not reconciled
// yet, and a later one of the first's type (TypeConflict).
func eventTypes(ns string) []hookv1.WebhookEventType {
	day := metav1.Duration{Duration: 24 * time.Hour}
	t0 := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	return []hookv1.WebhookEventType{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-created", CreationTimestamp: t0},
			Spec: hookv1.WebhookEventTypeSpec{Type: "order.created", Description: "An order was placed.\nSent once per order.",
				Schema: &apiextensionsv1.JSON{Raw: []byte(orderSchema)}, RequiredSecrets: []string{"claimToken"},
				Replay: hookv1.ReplayReissueOnly, ValidFor: &day, RetryPolicyRef: &hookv1.LocalObjectReference{Name: "payments"}},
			Status: hookv1.WebhookEventTypeStatus{Schema: "Valid", Endpoints: 2, Conditions: []metav1.Condition{
				{Type: hookv1.ConditionReady, Status: metav1.ConditionTrue, Reason: hookv1.ReasonReconciled}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken", CreationTimestamp: t0},
			Spec:       hookv1.WebhookEventTypeSpec{Type: "invoice.paid", Schema: &apiextensionsv1.JSON{Raw: []byte(`{"type": "string"}`)}},
			Status: hookv1.WebhookEventTypeStatus{Schema: "Invalid", Conditions: []metav1.Condition{
				{Type: hookv1.ConditionReady, Status: metav1.ConditionFalse, Reason: hookv1.ReasonSchemaInvalid, Message: "spec.schema.type: must be object"}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-created-again", CreationTimestamp: metav1.NewTime(t0.Add(time.Hour))},
			Spec:       hookv1.WebhookEventTypeSpec{Type: "order.created"},
			Status: hookv1.WebhookEventTypeStatus{Schema: "None", Conditions: []metav1.Condition{
				{Type: hookv1.ConditionReady, Status: metav1.ConditionFalse, Reason: hookv1.ReasonTypeConflict, Message: "older holds it"}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user-signup", CreationTimestamp: t0},
			Spec:       hookv1.WebhookEventTypeSpec{Type: "user.signup", Description: strings.Repeat("long ", 20)},
		},
	}
}

// TestCatalogTable: the table sorted by type (a type's holder first), the
// reason beside a Ready that is not True, the description's first line
// cut; NAMESPACE only across namespaces; a sentence for an empty catalog.
func TestCatalogTable(t *testing.T) {
	entries, err := catalogEntries(eventTypes("shop"), "", "shop", false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := printCatalogTable(&b, entries, "shop", printers.PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"TYPE            READY                     SCHEMA    REQUIRED SECRETS   REPLAY        VALID FOR   RETRY POLICY   ENDPOINTS   DESCRIPTION\n" +
		"invoice.paid    False (SchemaInvalid)     Invalid   -                  Retryable     -           -              0           -\n" +
		"order.created   True                      Valid     claimToken         ReissueOnly   24h         payments       2           An order was placed.…\n" +
		"order.created   False (TypeConflict)      None      -                  Retryable     -           -              0           -\n" +
		"user.signup     Unknown (NotReconciled)   None      -                  Retryable     -           -              0           long long long long long long long long long long long long…\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	b.Reset()
	if err := printCatalogTable(&b, entries[:1], "", printers.PrintOptions{NoHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "shop   invoice.paid   False (SchemaInvalid)   Invalid   -     Retryable   -     -     0     -\n" {
		t.Errorf("across namespaces, without headers: %q", got)
	}
	b.Reset()
	if err := printCatalogTable(&b, nil, "shop", printers.PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "no WebhookEventTypes in namespace shop: every type is accepted") {
		t.Errorf("empty: %q", b.String())
	}
}

// TestCatalogEntriesOfAType: TYPE picks the entries of that event type
// (holder first), else the one of that name; none is an error naming the
// types there are.
func TestCatalogEntriesOfAType(t *testing.T) {
	types := eventTypes("shop")
	entries, err := catalogEntries(types, "order.created", "shop", true)
	if err != nil || len(entries) != 2 || entries[0].Name != "order-created" || entries[1].Name != "order-created-again" {
		t.Fatalf("order.created: %+v, %v", entries, err)
	}
	if entries[0].Example == nil || entries[1].Example == nil {
		t.Errorf("examples: %+v", entries)
	}
	if entries, err := catalogEntries(types, "broken", "shop", true); err != nil || len(entries) != 1 || entries[0].Type != "invoice.paid" {
		t.Errorf("by name: %+v, %v", entries, err)
	}
	_, err = catalogEntries(types, "order.shipped", "shop", true)
	if err == nil || err.Error() != `no WebhookEventType of type (or named) "order.shipped" in namespace shop; its types: invoice.paid, order.created, user.signup` {
		t.Errorf("an unknown type: %v", err)
	}
	if _, err := catalogEntries(nil, "x", "", true); err == nil || !strings.HasSuffix(err.Error(), `"x" in any namespace: it has none`) {
		t.Errorf("none at all: %v", err)
	}
}

// TestCatalogDetails: a type in full, its example publish body (data from
// the schema, a placeholder per required secret), and why there is no
// example for a type whose schema is invalid.
func TestCatalogDetails(t *testing.T) {
	entries, err := catalogEntries(eventTypes("shop"), "", "shop", true)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := printCatalogDetails(&b, entries[:2]); err != nil {
		t.Fatal(err)
	}
	want := `invoice.paid (webhookeventtype/broken in namespace shop)
  Ready:            False (SchemaInvalid): spec.schema.type: must be object
  Schema:           Invalid
  Required secrets: -
  Replay:           Retryable
  Valid for:        -
  Retry policy:     -
  Endpoints:        0 subscribed
  Description:      -
  Example:          none: the schema is Invalid: every publish of the type is refused until it is fixed

order.created (webhookeventtype/order-created in namespace shop)
  Ready:            True
  Schema:           Valid
  Required secrets: claimToken
  Replay:           ReissueOnly
  Valid for:        24h
  Retry policy:     payments
  Endpoints:        2 subscribed
  Description:      An order was placed.
                    Sent once per order.
  Example publish body (POST /v1/namespaces/shop/events):
    {
      "type": "order.created",
      "data": {
        "amount": 1.5,
        "currency": "EUR",
        "placedAt": "2026-01-02T15:04:05Z"
      },
      "secrets": {
        "claimToken": "<claimToken>"
      }
    }
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{24 * time.Hour: "24h", 90 * time.Minute: "1h30m", 45 * time.Second: "45s", time.Hour + time.Second: "1h0m1s", 1500 * time.Millisecond: "1.5s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %s, want %s", d, got, want)
		}
	}
}

// TestCatalogAgainstTheAPIServer: the WebhookEventTypes the real API
// server admits (the test plays their controller for the status) print as
// the table, -A, TYPE in full, and -o json and -o yaml documents whose
// example validates against the type's schema; an unknown TYPE and -o wide
// are refused; a user without list on webhookeventtypes is refused by
// name, and granted list (what view aggregates) sees the catalog.
func TestCatalogAgainstTheAPIServer(t *testing.T) {
	startCluster(t)
	const ns = "plugin-catalog"
	namespaceWith(t, ns)
	for _, et := range eventTypes(ns) {
		status := et.Status
		et.CreationTimestamp = metav1.Time{}
		create(t, &et)
		if len(status.Conditions) == 0 {
			continue
		}
		for i := range status.Conditions {
			status.Conditions[i].LastTransitionTime = metav1.Now()
		}
		et.Status = status
		if err := cluster.admin.Status().Update(t.Context(), &et); err != nil {
			t.Fatalf("writing the status of %s: %v", et.Name, err)
		}
	}
	plugin := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := runPlugin(t, append(args, "-n", ns, "--kubeconfig", cluster.kubeconfig)...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, stderr)
		}
		return stdout
	}

	out := plugin("catalog")
	for _, row := range []string{
		`(?m)^TYPE\s+READY\s+SCHEMA\s+REQUIRED SECRETS\s+REPLAY\s+VALID FOR\s+RETRY POLICY\s+ENDPOINTS\s+DESCRIPTION$`,
		`(?m)^invoice\.paid\s+False \(SchemaInvalid\)\s+Invalid\s+-\s+Retryable\s+-\s+-\s+0\s+-$`,
		`(?m)^order\.created\s+True\s+Valid\s+claimToken\s+ReissueOnly\s+24h\s+payments\s+2\s+An order was placed\.…$`,
		`(?m)^user\.signup\s+Unknown \(NotReconciled\)\s+None\s+-\s+Retryable\s+-\s+-\s+0\s+long long`,
	} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("catalog: no line %s in\n%s", row, out)
		}
	}
	// The two types created in the same second are ordered by name, and the
	// conflicting one (created later) follows its holder.
	if i, j := strings.Index(out, "True "), strings.Index(out, "TypeConflict"); i < 0 || j < i {
		t.Errorf("catalog: the holder of order.created is not first:\n%s", out)
	}
	if out := plugin("catalog", "-A"); !regexp.MustCompile(`(?m)^` + ns + `\s+order\.created\s+True\s`).MatchString(out) {
		t.Errorf("catalog -A:\n%s", out)
	}

	out = plugin("catalog", "order.created")
	if !strings.Contains(out, "order.created (webhookeventtype/order-created in namespace "+ns+")") ||
		!strings.Contains(out, "Example publish body (POST /v1/namespaces/"+ns+"/events):") || !strings.Contains(out, `"claimToken": "<claimToken>"`) {
		t.Errorf("catalog order.created:\n%s", out)
	}
	if strings.Contains(out, "invoice.paid") {
		t.Errorf("catalog order.created shows another type:\n%s", out)
	}

	for _, format := range []string{"json", "yaml"} {
		out := plugin("catalog", "order.created", "-o", format)
		var doc catalogDocument
		if err := parseAs(format, []byte(out), &doc); err != nil {
			t.Fatalf("catalog -o %s does not parse: %v\n%s", format, err, out)
		}
		if len(doc.EventTypes) != 2 || doc.EventTypes[0].Name != "order-created" || doc.EventTypes[0].Example == nil ||
			doc.EventTypes[1].Reason != hookv1.ReasonTypeConflict {
			t.Fatalf("catalog -o %s: %+v", format, doc)
		}
		// The example is one the publish core would accept.
		s, err := catalog.Compile([]byte(orderSchema))
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(doc.EventTypes[0].Example.Data)
		if err != nil {
			t.Fatal(err)
		}
		if v := s.Validate(data); v != nil {
			t.Errorf("catalog -o %s: the example's data is refused: %v\n%s", format, v, data)
		}
	}
	var doc catalogDocument
	if err := json.Unmarshal([]byte(plugin("catalog", "-o", "json")), &doc); err != nil || len(doc.EventTypes) != 4 || doc.EventTypes[0].Example != nil {
		t.Errorf("catalog -o json without TYPE: %+v, %v (no examples without TYPE or --examples)", doc, err)
	}

	if _, _, err := runPlugin(t, "catalog", "order.shipped", "-n", ns, "--kubeconfig", cluster.kubeconfig); err == nil ||
		!strings.Contains(err.Error(), `no WebhookEventType of type (or named) "order.shipped" in namespace `+ns) {
		t.Errorf("an unknown type: %v", err)
	}
	if _, _, err := runPlugin(t, "catalog", "-o", "wide", "-n", ns, "--kubeconfig", cluster.kubeconfig); err == nil ||
		err.Error() != "-o wide: catalog prints one of table, json, yaml" {
		t.Errorf("-o wide: %v", err)
	}

	as := []string{"catalog", "-n", ns, "--kubeconfig", cluster.kubeconfig, "--as", "carol", "--as-group", "catalog-readers"}
	if _, _, err := runPlugin(t, as...); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `User "carol" cannot list resource "webhookeventtypes" in API group "hookkeeper.dev"`) {
		t.Fatalf("catalog as carol, who may not list: %v, want a Forbidden naming her", err)
	}
	create(t,
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "catalog-readers"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "catalog-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "catalog-readers"}},
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "catalog-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{hookv1.GroupVersion.Group}, Resources: []string{"webhookeventtypes"}, Verbs: []string{"list"}}},
		})
	var stdout string
	eventually(t, "catalog as carol in catalog-readers", func() error {
		var err error
		stdout, _, err = runPlugin(t, as...)
		return err
	})
	if !strings.Contains(stdout, "order.created") {
		t.Errorf("catalog as carol:\n%s", stdout)
	}
}
