package controllers

import hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"

// filterProblem is why spec.filter cannot be used. Interim: it compiles
// nothing until package eventfilter is merged (branch filters); until then
// fan-out, without an evaluator, sends a filtered endpoint nothing.
func filterProblem(*hookv1.WebhookEndpointSpec) *problem { return nil }
