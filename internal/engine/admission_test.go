package engine

import (
	"context"
	"testing"
	"time"
)

// TestAdmission: while the claims are behind, each delivery a claim
// starts admits one publish, a claim that started none admits none, and
// catching up admits every waiting publish and drops unspent credits.
func TestAdmission(t *testing.T) {
	// A wait with its context already done is admitted only by what is
	// ready when it starts (select picks among ready cases at random, so
	// a ready credit may lose to the context: check again with a live one).
	done, cancel := context.WithCancel(context.Background())
	cancel()
	admittedNow := func(a *admission) bool {
		if a.wait(done, time.Hour) {
			return true
		}
		select {
		case <-a.credits:
			return true
		default:
			return false
		}
	}

	a := newAdmission(4)
	if admittedNow(a) {
		t.Fatal("admitted before any claim started a delivery")
	}
	a.grant(0) // a claim that started nothing
	if admittedNow(a) {
		t.Fatal("admitted by a claim that started nothing")
	}
	a.grant(3)
	for i := range 3 {
		if !admittedNow(a) {
			t.Fatalf("publish %d of 3 not admitted by three started deliveries", i+1)
		}
	}
	if admittedNow(a) {
		t.Fatal("a fourth publish admitted by three started deliveries")
	}

	a.grant(10) // beyond the capacity: four credits
	for range 4 {
		if !admittedNow(a) {
			t.Fatal("a credit within the capacity was not kept")
		}
	}
	if admittedNow(a) {
		t.Fatal("credits kept beyond the capacity")
	}

	var waiting []<-chan struct{}
	for range 3 {
		waiting = append(waiting, a.caughtUpCh())
	}
	a.open()
	for i, ch := range waiting {
		select {
		case <-ch:
		default:
			t.Fatalf("waiting publish %d of 3 not admitted when the claims caught up", i+1)
		}
	}
	if admittedNow(a) {
		t.Fatal("a publish coming after the claims caught up was admitted without a credit")
	}

	a.grant(2)
	a.open()
	if admittedNow(a) {
		t.Fatal("a credit from before the claims caught up admitted a publish after it")
	}
}
