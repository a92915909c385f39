package v1alpha1

// Reasons of a RetryPolicy's HorizonFit condition. The evidence package
// finds which rule applies (internal/evidence.Finding); the controller
// maps each finding onto one of these.
const (
	// ReasonHorizonFits (HorizonFit=True): enough deliveries settled, no
	// tail of the schedule recovers nothing, and no exhausted delivery's
	// endpoint succeeded again soon after the policy gave up.
	ReasonHorizonFits = "HorizonFits"
	// ReasonTailRecoversNothing (HorizonFit=False): the last attempts of the
	// schedule recovered none of the deliveries that reached them: the
	// horizon is longer than the traffic needs.
	ReasonTailRecoversNothing = "TailRecoversNothing"
	// ReasonHorizonTooShort (HorizonFit=False): deliveries were exhausted on
	// endpoints that succeeded again soon after the policy gave up: the
	// horizon is shorter than the outages it meets.
	ReasonHorizonTooShort = "HorizonTooShort"
	// ReasonInsufficientEvidence (HorizonFit=Unknown): too few deliveries
	// settled under the policy's current generation in 7 days to say.
	ReasonInsufficientEvidence = "InsufficientEvidence"
)
