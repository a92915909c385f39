package testenv

import (
	"fmt"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// ApplyShippedClusterRoles renders config/default with kubectl kustomize and
// applies its ClusterRoles (names prefixed as an install prefixes them) to
// the API server of kubeconfig, so that tests authorise users with the
// roles users install rather than with roles of their own. It returns them.
func ApplyShippedClusterRoles(kubectl, kubeconfig string) ([]rbacv1.ClusterRole, error) {
	rendered, err := RunKubectl(kubectl, kubeconfig, "", "kustomize", filepath.Join(RepoRoot(), "config", "default"))
	if err != nil {
		return nil, err
	}
	var (
		roles []rbacv1.ClusterRole
		docs  []string
	)
	for doc := range strings.SplitSeq(rendered, "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			return nil, fmt.Errorf("parsing config/default: %w", err)
		}
		if role.Kind == "ClusterRole" {
			roles, docs = append(roles, role), append(docs, doc)
		}
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("config/default renders no ClusterRole")
	}
	if out, err := RunKubectl(kubectl, kubeconfig, strings.Join(docs, "\n---\n"), "apply", "--server-side", "-f", "-"); err != nil {
		return nil, fmt.Errorf("applying the shipped ClusterRoles: %w\n%s", err, out)
	}
	return roles, nil
}
