package main

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
)

// controller-runtime v0.25's manager, on a stop it was asked for, cancels
// its leader election last; client-go then calls OnStoppedLeading, which
// the manager turns into errors.New("leader election lost") and, since the
// stop is under way, logs as "error received after stop sequence was
// engaged". On a SIGTERM that is the Lease being released as asked
// (LeaderElectionReleaseOnCancel), not an error; upstream filters it from
// a later release (kubernetes-sigs/controller-runtime#3535). Until then
// the manager's logger reports it at info level, and only while stopping:
// a Lease lost during the run still fails Start and is logged as an error.
const (
	stopSequenceMessage = "error received after stop sequence was engaged"
	leaderElectionLost  = "leader election lost"
)

// stoppingLogger wraps the manager's logger: while stopping() is true, the
// manager's report of its own leader-election release is an info line.
func stoppingLogger(base logr.Logger, stopping func() bool) logr.Logger {
	sink := base.GetSink()
	if d, ok := sink.(logr.CallDepthLogSink); ok {
		sink = d.WithCallDepth(1) // report the caller, not the wrapper
	}
	return logr.New(&stoppingSink{LogSink: sink, stopping: stopping})
}

type stoppingSink struct {
	logr.LogSink
	stopping func() bool
}

// releasedOnStop reports whether an error log entry is the manager telling
// of the Lease it released because it was asked to stop.
// So is client-go's leader elector reporting that its own renewal was
// cancelled by the stop.
func releasedOnStop(err error, msg string, stopping bool) bool {
	if !stopping || err == nil {
		return false
	}
	return (msg == stopSequenceMessage && err.Error() == leaderElectionLost) || errors.Is(err, context.Canceled)
}

func (s *stoppingSink) Error(err error, msg string, kv ...any) {
	if releasedOnStop(err, msg, s.stopping()) {
		if msg == stopSequenceMessage {
			msg = "released the leader election Lease on shutdown"
		}
		s.Info(0, msg, append(kv, "stopping", err.Error())...)
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s *stoppingSink) WithValues(kv ...any) logr.LogSink {
	return &stoppingSink{LogSink: s.LogSink.WithValues(kv...), stopping: s.stopping}
}

func (s *stoppingSink) WithName(name string) logr.LogSink {
	return &stoppingSink{LogSink: s.LogSink.WithName(name), stopping: s.stopping}
}

// Enabled and Info are the wrapped sink's; so is the call depth, one
// frame deeper for the wrapper.
func (s *stoppingSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return &stoppingSink{LogSink: d.WithCallDepth(depth), stopping: s.stopping}
	}
	return s
}
