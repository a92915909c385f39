package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// watchNamespaces is --watch-namespaces: the namespaces whose hookkeeper
// objects and Secrets the manager watches, for a namespace-scoped install
// whose Roles grant Secrets and the CRDs only there (docs/install.md,
// "Namespace-scoped install"). Empty: every namespace.
type watchNamespaces string

const watchNamespacesUsage = "Comma-separated namespaces whose RetryPolicies, WebhookEndpoints, DeliveryRecoveries and Secrets the manager watches and reconciles, for an install whose Roles grant them only there; empty: every namespace (the ClusterRole's install)."

// cacheOptions returns the cache options that restrict every informer of
// the manager (the controllers' objects and the Secrets' metadata) to the
// namespaces named, or the default (all namespaces) when none is.
func (w watchNamespaces) cacheOptions() (cache.Options, error) {
	var o cache.Options
	for ns := range strings.SplitSeq(string(w), ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return o, fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if o.DefaultNamespaces == nil {
			o.DefaultNamespaces = map[string]cache.Config{}
		}
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	return o, nil
}
