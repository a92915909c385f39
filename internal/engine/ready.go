package engine

import (
	"fmt"
	"time"
)

// readyWithin is how long after its last good claim round the engine
// still says it can deliver: the claim loop ends a round at least every
// IdleWait when the ledger answers, so a longer silence means the ledger
// does not (claims failing) or the loop is stuck.
func (e *Engine) readyWithin() time.Duration {
	return max(15*time.Second, 5*e.opts.IdleWait)
}

// Ready reports whether this engine can deliver: Run runs, has ended its
// first claim round, and has ended one without error within readyWithin.
// It asks nothing of the Kubernetes API server (issue #44): readiness
// is the data plane's, which outlives the control plane.
func (e *Engine) Ready() error {
	if !e.running.isOn() {
		return fmt.Errorf("the delivery engine is not running")
	}
	select {
	case <-e.running.started:
	default:
		return fmt.Errorf("the delivery engine has not ended its first claim round")
	}
	last := time.Unix(0, e.roundOK.Load())
	if age := e.opts.Clock.Now().Sub(last); e.roundOK.Load() == 0 || age > e.readyWithin() {
		return fmt.Errorf("no claim round of the delivery engine has succeeded for %s (the ledger does not answer?)", age.Round(time.Second))
	}
	return nil
}
