package controllers

import (
	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/eventfilter"
)

// filterProblem is why spec.filter cannot be used, nil when it can or
// there is none: it is compiled and its cost estimated here, once per
// reconcile, so that fan-out never meets an expression it must refuse. The
// message is eventfilter's, with the position of the error.
func filterProblem(spec *hookv1.WebhookEndpointSpec) *problem {
	if spec.Filter == "" {
		return nil
	}
	if _, err := eventfilter.Compile(spec.Filter); err != nil {
		return &problem{hookv1.ReasonFilterInvalid, "spec." + err.Error()} // "spec.filter: 1:14: …"
	}
	return nil
}
