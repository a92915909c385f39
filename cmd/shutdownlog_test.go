package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestReleasedOnStop(t *testing.T) {
	lost := errors.New(leaderElectionLost)
	for _, tt := range []struct {
		name     string
		err      error
		msg      string
		stopping bool
		want     bool
	}{
		{"the release the manager reports while stopping", lost, stopSequenceMessage, true, true},
		{"a Lease lost during the run stays an error", lost, stopSequenceMessage, false, false},
		{"another error while stopping stays an error", errors.New("cache sync failed"), stopSequenceMessage, true, false},
		{"the same error under another message stays an error", lost, "problem running manager", true, false},
		{"no error", nil, stopSequenceMessage, true, false},
		{"the leader elector's renewal cancelled by the stop", fmt.Errorf("get lease: %w", context.Canceled), "Error retrieving lease lock", true, true},
		{"a cancellation during the run stays an error", context.Canceled, "Error retrieving lease lock", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := releasedOnStop(tt.err, tt.msg, tt.stopping); got != tt.want {
				t.Errorf("releasedOnStop = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStoppingLoggerKeepsNamesAndValues: the wrapper survives WithName and
// WithValues (the manager logs through derived loggers) and demotes only
// the release it is told about.
func TestStoppingLoggerKeepsNamesAndValues(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{})
	stopping := false
	log := stoppingLogger(base, func() bool { return stopping }).WithName("manager").WithValues("k", "v")

	log.Error(errors.New(leaderElectionLost), stopSequenceMessage)
	stopping = true
	log.Error(errors.New(leaderElectionLost), stopSequenceMessage)
	log.Error(errors.New("other"), stopSequenceMessage)
	if len(lines) != 3 {
		t.Fatalf("lines = %q", lines)
	}
	for i, want := range []string{`"error"="leader election lost"`, `"msg"="released the leader election Lease on shutdown"`, `"error"="other"`} {
		if !contains(lines[i], want) || !contains(lines[i], `manager`) || !contains(lines[i], `"k"="v"`) {
			t.Errorf("line %d = %q, want %s with the name and values", i, lines[i], want)
		}
	}
	if contains(lines[1], `"error"`) {
		t.Errorf("the release on stop was logged as an error: %q", lines[1])
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
