package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// outputFlags is -o of a verb whose default output is its own text for
// people: with -o json, yaml, kyaml, name, jsonpath=... or go-template=...
// the verb prints the objects it read or made through cli-runtime's
// printers instead, as kubectl get would print them.
type outputFlags struct {
	print *genericclioptions.PrintFlags
	// wide is whether -o wide (the verb's table with more columns) is
	// allowed.
	wide bool
}

func addOutputFlags(cmd *cobra.Command, wide bool) *outputFlags {
	o := &outputFlags{print: genericclioptions.NewPrintFlags(""), wide: wide}
	o.print.AddFlags(cmd)
	formats := o.print.AllowedFormats()
	if wide {
		formats = append([]string{"wide"}, formats...)
	}
	cmd.Flags().Lookup("output").Usage = "Output format, instead of the verb's own text. One of: (" + strings.Join(formats, ", ") + ")."
	return o
}

// printer returns the printer -o asks for, nil for the verb's own text
// (and for -o wide, which only changes that text), or an error naming the
// formats allowed. Verbs call it before they change anything.
func (o *outputFlags) printer() (printers.ResourcePrinter, error) {
	switch f := *o.print.OutputFormat; {
	case f == "":
		return nil, nil
	case f == "wide" && o.wide:
		return nil, nil
	case f == "wide":
		return nil, fmt.Errorf("-o wide: only status prints a table; use one of %s", strings.Join(o.print.AllowedFormats(), ", "))
	}
	return o.print.ToPrinter()
}

// isWide is whether -o wide was asked for.
func (o *outputFlags) isWide() bool { return *o.print.OutputFormat == "wide" }

// printObject prints obj with its apiVersion and kind set.
func (p *plugin) printObject(pr printers.ResourcePrinter, obj client.Object, w io.Writer) error {
	u, err := p.toUnstructured(obj)
	if err != nil {
		return err
	}
	return pr.PrintObj(u, w)
}

// printList prints objs as kubectl get prints several objects: a v1 List.
func (p *plugin) printList(pr printers.ResourcePrinter, objs []client.Object, w io.Writer) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}}}
	for _, obj := range objs {
		u, err := p.toUnstructured(obj)
		if err != nil {
			return err
		}
		list.Items = append(list.Items, *u)
	}
	return pr.PrintObj(list, w)
}

// toUnstructured converts obj with its group, version and kind set (a
// typed client leaves them empty, and the printers need them).
func (p *plugin) toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, p.scheme)
	if err != nil {
		return nil, fmt.Errorf("the kind of %T: %w", obj, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s %s for printing: %w", gvk.Kind, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
