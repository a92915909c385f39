package main

import (
	"errors"
	"sync/atomic"

	"github.com/hookkeeper/hookkeeper/controllers"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// incarnationContracts gives the publish cores, which outlive the control
// plane's incarnations, the contracts of the latest one.
type incarnationContracts struct {
	current atomic.Pointer[controllers.EventTypeContracts]
}

var errNoContracts = errors.New("the event types' contracts are not known yet: the control plane has not started")

// Contract implements publish.Contracts.
func (c *incarnationContracts) Contract(namespace, typ string) (*publish.Contract, bool, error) {
	cur := c.current.Load()
	if cur == nil {
		return nil, false, errNoContracts
	}
	return cur.Contract(namespace, typ)
}
