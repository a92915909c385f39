package controllers

import (
	"fmt"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// wireProblem says why the endpoint as specified can never be sent (the
// rules of package wire, which the engine's registration and sender apply
// too), or nil. The CRD refuses such a spec at admission; this guards the
// objects stored before a rule existed, which would otherwise be Ready
// while every attempt fails.
func wireProblem(spec *hookv1.WebhookEndpointSpec) *problem {
	if err := wire.CheckURL(spec.URL); err != nil {
		return &problem{hookv1.ReasonURLInvalid, "spec.url: " + err.Error()}
	}
	var hs wire.HeaderSet
	for i, h := range spec.Headers {
		if err := hs.Add(h.Name, h.Value); err != nil {
			return &problem{hookv1.ReasonHeadersInvalid, fmt.Sprintf("spec.headers[%d]: %v", i, err)}
		}
	}
	return nil
}
