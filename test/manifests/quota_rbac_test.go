package manifests

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestNamespaceEditorsCannotRaiseTheirQuota: of the ClusterRoles the
// bundle ships, those that aggregate into the built-in view, edit or admin
// roles grant webhookquotas reads only, and view gets them (so edit and
// admin, which aggregate view, do too); the role that writes them
// aggregates into nothing. A namespace's editors and admins see their
// WebhookQuota and cannot create, change or delete it.
func TestNamespaceEditorsCannotRaiseTheirQuota(t *testing.T) {
	kubectl, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := testenv.RunKubectl(kubectl, "", "", "kustomize", filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	reads := []string{"get", "list", "watch"}
	var viewReads, writer bool
	for doc := range strings.SplitSeq(rendered, "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "ClusterRole" {
			continue
		}
		var aggregated []string
		for _, to := range []string{"view", "edit", "admin"} {
			if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] == "true" {
				aggregated = append(aggregated, to)
			}
		}
		for _, rule := range role.Rules {
			if !grants(rule, "hookkeeper.dev", "webhookquotas") {
				continue
			}
			writes := slices.ContainsFunc(rule.Verbs, func(v string) bool { return !slices.Contains(reads, v) })
			if writes && len(aggregated) > 0 {
				t.Errorf("ClusterRole %s aggregates into %v and grants %v on webhookquotas", role.Name, aggregated, rule.Verbs)
			}
			if writes && role.Name == "hookkeeper-webhookquotas-admin-role" {
				writer = true
			}
			if slices.Contains(aggregated, "view") && !writes && len(rule.Verbs) == len(reads) {
				viewReads = true
			}
		}
	}
	if !viewReads {
		t.Error("no ClusterRole aggregated into view grants get, list and watch on webhookquotas")
	}
	if !writer {
		t.Error("hookkeeper-webhookquotas-admin-role does not write webhookquotas")
	}
}

// grants reports whether rule covers resource of group (wildcards
// included).
func grants(rule rbacv1.PolicyRule, group, resource string) bool {
	return (slices.Contains(rule.APIGroups, group) || slices.Contains(rule.APIGroups, "*")) &&
		(slices.Contains(rule.Resources, resource) || slices.Contains(rule.Resources, "*"))
}
