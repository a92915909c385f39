// Package retrypolicy reconciles RetryPolicies (their schedule, evidence
// and HorizonFit advice) and converts a policy into the engine's form for
// the controllers whose objects name one.
package retrypolicy
