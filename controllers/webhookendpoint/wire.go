package webhookendpoint

import (
	"fmt"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// wireProblem says why the endpoint as specified can never be sent (the
// rules of package wire, which the engine's registration and sender apply
// too), or nil. The CRD refuses such a spec at admission; this guards the
// objects stored before a rule existed, which would otherwise be Ready
// while every attempt fails.
func wireProblem(spec *hookv1.WebhookEndpointSpec) *conditions.Problem {
	if err := wire.CheckURL(spec.URL); err != nil {
		return &conditions.Problem{Reason: hookv1.ReasonURLInvalid, Message: "spec.url: " + err.Error()}
	}
	var hs wire.HeaderSet
	for i, h := range spec.Headers {
		if err := hs.Add(h.Name, h.Value); err != nil {
			return &conditions.Problem{Reason: hookv1.ReasonHeadersInvalid, Message: fmt.Sprintf("spec.headers[%d]: %v", i, err)}
		}
	}
	return nil
}
