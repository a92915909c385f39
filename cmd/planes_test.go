package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// TestSuperviseStartsAgain: a component that stops (an error, or nil
// before its context ended) is started again, and supervise returns once
// the context ends, without starting it again.
func TestSuperviseStartsAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := make(chan int, 10)
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 10, Cap: 5 * time.Millisecond}
		supervise(ctx, logr.Discard(), "the test component", b, clock.RealClock{}, func(ctx context.Context) error {
			n++
			runs <- n
			switch n {
			case 1:
				return errors.New("leader election lost")
			case 2:
				return nil
			}
			<-ctx.Done() // the third incarnation runs until the end
			return ctx.Err()
		})
	}()
	for want := 1; want <= 3; want++ {
		if got := <-runs; got != want {
			t.Fatalf("run %d; want %d", got, want)
		}
	}
	cancel()
	<-done
	if len(runs) != 0 {
		t.Fatalf("started again after the context ended")
	}
}
