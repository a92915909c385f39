package catalog

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestNumbersAsTheAPIServer: kube-apiserver itself, serving a CRD whose
// data has numberSchema's schema, gives every one of numberCases the
// verdict Validate gives it, on the same path. (Created with dryRun: each
// is validated as a create, and nothing is stored.)
func TestNumbersAsTheAPIServer(t *testing.T) {
	assets, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	schema := objectOf(numberFields...)
	var data apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal([]byte(schema), &data); err != nil {
		t.Fatal(err)
	}
	const group = "catalog.test.hookkeeper.dev"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "numbers." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "numbers", Singular: "number", Kind: "Number", ListKind: "NumberList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"data": data}},
					},
				}},
			}},
		},
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}},
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/apis/" + group + "/v1/namespaces/default/numbers?dryRun=All"

	ours, err := Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range numberCases {
		// The body as written: its numbers reach the API server as they
		// reach a publish.
		body := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Number","metadata":{"name":"n%d"},"spec":{"data":{%q:%s}}}`, group, i, c.field, c.value)
		causes, message := create(t, hc, url, body)
		v := ours.Validate([]byte(`{"` + c.field + `":` + c.value + `}`))
		switch {
		case (causes == nil) != (v == nil):
			t.Errorf("%s: %s, kube-apiserver %s", c.value, verdict(v), message)
		case (v == nil) != (c.rule == ""):
			t.Errorf("%s: both %s, want %q", c.value, verdict(v), c.rule)
		case v != nil && !slices.ContainsFunc(causes, func(c metav1.StatusCause) bool { return placed(c, "spec."+v.Field) }):
			t.Errorf("%s: refused at %s, kube-apiserver: %s", c.value, v.Field, message)
		case v != nil:
			t.Logf("%s: %s; kube-apiserver: %s", c.value, v, message)
		}
	}
}

// create posts body and returns the causes the API server refuses it for,
// nil when it accepts it, and its answer.
func create(t *testing.T, hc *http.Client, url, body string) (causes []metav1.StatusCause, message string) {
	t.Helper()
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	switch resp.StatusCode {
	case http.StatusCreated:
		return nil, "accepted"
	case http.StatusUnprocessableEntity:
		var st metav1.Status
		if err := json.Unmarshal(answer, &st); err != nil || st.Details == nil || len(st.Details.Causes) == 0 {
			t.Fatalf("422 without causes: %s", answer)
		}
		return st.Details.Causes, st.Message
	}
	t.Fatalf("%s: %d %s", body, resp.StatusCode, answer)
	return nil, ""
}

// placed reports whether c is at path. The API server places a refusal
// kube-openapi gives as text only ("Checked value must be of type integer
// with format int32 in spec.data.int32") at no field ("<nil>"): its text
// names the path.
func placed(c metav1.StatusCause, path string) bool {
	if c.Field == "<nil>" || c.Field == "" {
		return strings.HasSuffix(c.Message, " in "+path)
	}
	return c.Field == path
}

func verdict(v *Violation) string {
	if v == nil {
		return "accepted"
	}
	return "refused (" + v.Error() + ")"
}
