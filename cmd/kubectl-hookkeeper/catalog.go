package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// catalogFormats are catalog's -o: its own table (the default), or the
// catalog as a JSON or YAML document. Not cli-runtime's printers: the
// catalog is not the objects (it adds the examples).
var catalogFormats = []string{"table", "json", "yaml"}

func (p *plugin) catalogCommand() *cobra.Command {
	var (
		allNamespaces, examples, noHeaders bool
		output                             string
	)
	cmd := &cobra.Command{
		Use:   "catalog [TYPE] [-A] [--examples] [-o table|json|yaml]",
		Short: "The event types a namespace publishes (its WebhookEventTypes), with example bodies",
		Long: `Print the namespace's catalog of event types, its WebhookEventTypes (RBAC:
list webhookeventtypes, which view has): for each, its type, whether it is
Ready (the reason when not), its schema (None, Valid or Invalid), the secrets
every publish must carry, its replay class, how long it stays valid, its
retry policy, how many endpoints subscribe to it, and its description.

With TYPE (an event type, else a WebhookEventType's name) or --examples, print
each type in full with an example publish body (POST
/v1/namespaces/NS/events), its data generated from the schema: the schema's
example, else its default, else its first enum value, else a value of its
type, format, bounds and lengths; every property, one item per array.

-o json or -o yaml prints the catalog as a document ({"eventTypes": [...]}),
with the examples under the same conditions.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(catalogFormats, output) {
				return fmt.Errorf("-o %s: catalog prints one of %s", output, strings.Join(catalogFormats, ", "))
			}
			s, err := p.open(nil)
			if err != nil {
				return err
			}
			if allNamespaces {
				s.ns = ""
			}
			var list hookv1.WebhookEventTypeList
			if err := s.c.List(cmd.Context(), &list, client.InNamespace(s.ns)); err != nil {
				return fmt.Errorf("listing WebhookEventTypes: %w", err)
			}
			typ := ""
			if len(args) == 1 {
				typ = args[0]
			}
			entries, err := catalogEntries(list.Items, typ, s.ns, typ != "" || examples)
			if err != nil {
				return err
			}
			switch {
			case output == "json" || output == "yaml":
				return printCatalogDocument(p.streams.Out, entries, output)
			case typ != "" || examples:
				return printCatalogDetails(p.streams.Out, entries)
			}
			return printCatalogTable(p.streams.Out, entries, s.ns, printers.PrintOptions{NoHeaders: noHeaders})
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Across all namespaces.")
	cmd.Flags().BoolVar(&examples, "examples", false, "Print every type in full, with an example publish body.")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "Print the table without its header line.")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format. One of: ("+strings.Join(catalogFormats, ", ")+").")
	return cmd
}

// catalogEntry is one event type of the catalog, as -o json|yaml prints
// it.
type catalogEntry struct {
	Namespace string `json:"namespace"`
	// Name is the WebhookEventType's.
	Name string `json:"name"`
	Type string `json:"type"`
	// Ready is the Ready condition's status (Unknown before the operator
	// reconciled the type); Reason and Message say why when it is not
	// True.
	Ready           string   `json:"ready"`
	Reason          string   `json:"reason,omitempty"`
	Message         string   `json:"message,omitempty"`
	Schema          string   `json:"schema"`
	RequiredSecrets []string `json:"requiredSecrets,omitempty"`
	Replay          string   `json:"replay"`
	ValidFor        string   `json:"validFor,omitempty"`
	RetryPolicy     string   `json:"retryPolicy,omitempty"`
	// Endpoints is how many WebhookEndpoints subscribe to the type.
	Endpoints   int32  `json:"endpoints"`
	Description string `json:"description,omitempty"`
	// Example is a publish body of the type, with TYPE or --examples;
	// NoExample says why there is none.
	Example   *exampleBody `json:"example,omitempty"`
	NoExample string       `json:"noExample,omitempty"`
}

// exampleBody is the body of POST /v1/namespaces/NS/events.
type exampleBody struct {
	Type    string            `json:"type"`
	Data    any               `json:"data"`
	Secrets map[string]string `json:"secrets,omitempty"`
}

// catalogEntries are the entries of types, sorted by namespace, type and
// age (the type's holder first); with typ, only those of that event type,
// else of that name, and an error naming the types there are when none
// is. ns is the namespace listed ("" for all), for messages.
func catalogEntries(types []hookv1.WebhookEventType, typ, ns string, withExamples bool) ([]catalogEntry, error) {
	types = slices.Clone(types)
	slices.SortFunc(types, func(a, b hookv1.WebhookEventType) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Spec.Type, b.Spec.Type),
			a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	if typ != "" {
		matches := slices.DeleteFunc(slices.Clone(types), func(et hookv1.WebhookEventType) bool { return et.Spec.Type != typ })
		if len(matches) == 0 {
			matches = slices.DeleteFunc(slices.Clone(types), func(et hookv1.WebhookEventType) bool { return et.Name != typ })
		}
		if len(matches) == 0 {
			return nil, noSuchType(types, typ, ns)
		}
		types = matches
	}
	entries := make([]catalogEntry, len(types))
	for i := range types {
		entries[i] = catalogEntryOf(&types[i], withExamples)
	}
	return entries, nil
}

func noSuchType(types []hookv1.WebhookEventType, typ, ns string) error {
	where := "in namespace " + ns
	if ns == "" {
		where = "in any namespace"
	}
	msg := fmt.Sprintf("no WebhookEventType of type (or named) %q %s", typ, where)
	var known []string
	for _, et := range types {
		if !slices.Contains(known, et.Spec.Type) {
			known = append(known, et.Spec.Type)
		}
	}
	switch {
	case len(known) == 0:
		msg += ": it has none"
	case len(known) > 10:
		msg += fmt.Sprintf("; its types: %s and %d more", strings.Join(known[:10], ", "), len(known)-10)
	default:
		msg += "; its types: " + strings.Join(known, ", ")
	}
	return errors.New(msg)
}

// catalogEntryOf is et's entry, as its spec and status say.
func catalogEntryOf(et *hookv1.WebhookEventType, withExample bool) catalogEntry {
	e := catalogEntry{
		Namespace: et.Namespace, Name: et.Name, Type: et.Spec.Type, Schema: et.Status.Schema,
		RequiredSecrets: et.Spec.RequiredSecrets, Replay: string(et.Spec.Replay), Endpoints: et.Status.Endpoints,
		Description: et.Spec.Description,
	}
	switch c := meta.FindStatusCondition(et.Status.Conditions, hookv1.ConditionReady); {
	case c == nil:
		e.Ready, e.Reason, e.Message = string(metav1.ConditionUnknown), "NotReconciled", "the operator has not reconciled the type yet"
	case c.Status != metav1.ConditionTrue:
		e.Ready, e.Reason, e.Message = string(c.Status), c.Reason, c.Message
	default:
		e.Ready = string(c.Status)
	}
	switch {
	case e.Schema != "":
	case et.Spec.Schema == nil:
		e.Schema = "None"
	default:
		e.Schema = "Unknown"
	}
	if e.Replay == "" {
		e.Replay = string(hookv1.ReplayRetryable)
	}
	if et.Spec.ValidFor != nil {
		e.ValidFor = shortDuration(et.Spec.ValidFor.Duration)
	}
	if ref := et.Spec.RetryPolicyRef; ref != nil {
		e.RetryPolicy = ref.Name
	}
	if withExample {
		body, err := exampleBodyOf(et)
		if err != nil {
			e.NoExample = err.Error()
		} else {
			e.Example = &body
		}
	}
	return e
}

// exampleBodyOf is a publish body of et's type: data generated from its
// schema ({} without one), a placeholder for each required secret.
func exampleBodyOf(et *hookv1.WebhookEventType) (exampleBody, error) {
	body := exampleBody{Type: et.Spec.Type, Data: map[string]any{}}
	if et.Status.Schema == "Invalid" {
		return body, errors.New("the schema is Invalid: every publish of the type is refused until it is fixed")
	}
	if et.Spec.Schema != nil {
		var s apiextensionsv1.JSONSchemaProps
		if err := json.Unmarshal(et.Spec.Schema.Raw, &s); err != nil {
			return body, fmt.Errorf("the schema does not parse: %v", err)
		}
		body.Data = exampleData(&s)
	}
	if len(et.Spec.RequiredSecrets) > 0 {
		body.Secrets = map[string]string{}
		for _, name := range et.Spec.RequiredSecrets {
			body.Secrets[name] = "<" + name + ">"
		}
	}
	return body, nil
}

// shortDuration drops the zero units Duration.String ends with: 24h, not
// 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// catalogColumns are the catalog table's; NAMESPACE only across
// namespaces.
var catalogColumns = []metav1.TableColumnDefinition{
	{Name: "Namespace", Type: "string"},
	{Name: "Type", Type: "string"},
	{Name: "Ready", Type: "string"},
	{Name: "Schema", Type: "string"},
	{Name: "Required Secrets", Type: "string"},
	{Name: "Replay", Type: "string"},
	{Name: "Valid For", Type: "string"},
	{Name: "Retry Policy", Type: "string"},
	{Name: "Endpoints", Type: "integer"},
	{Name: "Description", Type: "string"},
}

// descriptionWidth bounds the table's description: its first line, cut.
const descriptionWidth = 60

// printCatalogTable prints entries as a table (cli-runtime's, as kubectl
// get's), or a sentence when there are none. ns is the namespace listed,
// "" for all.
func printCatalogTable(w io.Writer, entries []catalogEntry, ns string, opts printers.PrintOptions) error {
	if len(entries) == 0 {
		where := "namespace " + ns
		if ns == "" {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(w, "no WebhookEventTypes in %s: every type is accepted without a contract (unless the namespace is labelled %s=true)\n",
			where, hookv1.StrictEventTypesLabel)
		return err
	}
	cols := catalogColumns
	if ns != "" {
		cols = cols[1:]
	}
	table := &metav1.Table{ColumnDefinitions: cols}
	for _, e := range entries {
		ready := e.Ready
		if e.Reason != "" {
			ready += " (" + e.Reason + ")"
		}
		cells := []any{e.Namespace, e.Type, ready, e.Schema, orDash(strings.Join(e.RequiredSecrets, ",")), e.Replay,
			orDash(e.ValidFor), orDash(e.RetryPolicy), e.Endpoints, orDash(firstLine(e.Description, descriptionWidth))}
		if ns != "" {
			cells = cells[1:]
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells})
	}
	return printers.NewTablePrinter(opts).PrintObj(table, w)
}

// firstLine is s's first line, cut to width characters with an ellipsis.
func firstLine(s string, width int) string {
	line, _, more := strings.Cut(strings.TrimSpace(s), "\n")
	line = strings.TrimSpace(line)
	if utf8.RuneCountInString(line) > width {
		line, more = string([]rune(line)[:width-1]), true
	}
	if more {
		line += "…"
	}
	return line
}

// printCatalogDetails prints each entry in full, with its example.
func printCatalogDetails(w io.Writer, entries []catalogEntry) error {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s (webhookeventtype/%s in namespace %s)\n", e.Type, e.Name, e.Namespace)
		field := func(name, value string) { fmt.Fprintf(&b, "  %-18s%s\n", name+":", value) }
		ready := e.Ready
		if e.Reason != "" {
			ready += " (" + e.Reason + "): " + e.Message
		}
		field("Ready", ready)
		field("Schema", e.Schema)
		field("Required secrets", orDash(strings.Join(e.RequiredSecrets, ", ")))
		field("Replay", e.Replay)
		field("Valid for", orDash(e.ValidFor))
		field("Retry policy", orDash(e.RetryPolicy))
		field("Endpoints", fmt.Sprintf("%d subscribed", e.Endpoints))
		field("Description", orDash(strings.ReplaceAll(strings.TrimSpace(e.Description), "\n", "\n"+strings.Repeat(" ", 20))))
		if e.Example == nil {
			field("Example", "none: "+e.NoExample)
			continue
		}
		fmt.Fprintf(&b, "  Example publish body (POST /v1/namespaces/%s/events):\n    ", e.Namespace)
		if err := encodeJSON(&b, e.Example, "    ", "  "); err != nil {
			return fmt.Errorf("the example of %s: %w", e.Type, err)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// catalogDocument is what -o json|yaml print.
type catalogDocument struct {
	EventTypes []catalogEntry `json:"eventTypes"`
}

func printCatalogDocument(w io.Writer, entries []catalogEntry, format string) error {
	doc := catalogDocument{EventTypes: entries}
	if doc.EventTypes == nil {
		doc.EventTypes = []catalogEntry{}
	}
	if format == "json" {
		if err := encodeJSON(w, doc, "", "    "); err != nil {
			return fmt.Errorf("printing the catalog as json: %w", err)
		}
		return nil
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("printing the catalog as yaml: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// encodeJSON writes v indented, and a newline, without escaping <, > and
// & (the secrets' placeholders are <name>).
func encodeJSON(w io.Writer, v any, prefix, indent string) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, indent)
	return enc.Encode(v)
}
