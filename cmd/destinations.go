package main

import (
	"flag"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/destination"
)

// destinationFlags are the flags of the destination policy: which addresses
// endpoints may not be aimed at, and the operator's exceptions.
type destinationFlags struct {
	allowed, services, pods string
}

func (d *destinationFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&d.allowed, "allowed-destination-cidrs", "", "Comma-separated CIDRs endpoints may deliver to even though they are forbidden by default (loopback, link-local, cloud metadata, private and reserved ranges, the cluster's ranges), such as 127.0.0.0/8 for local development or the range of in-cluster receivers.")
	fs.StringVar(&d.services, "cluster-service-cidrs", "", "Comma-separated CIDRs of the cluster's Services, which endpoints may not deliver to unless --allowed-destination-cidrs allows them.")
	fs.StringVar(&d.pods, "cluster-pod-cidrs", "", "Comma-separated CIDRs of the cluster's Pods, which endpoints may not deliver to unless --allowed-destination-cidrs allows them.")
}

// policy builds the destination policy the engine's sender dials through
// and the WebhookEndpoint controller checks URLs with. The manager always
// has one: the default denies; only the flags allow.
func (d *destinationFlags) policy() (*destination.Policy, error) {
	var o destination.Options
	var err error
	if o.Allowed, err = destination.ParseCIDRs(d.allowed); err != nil {
		return nil, fmt.Errorf("--allowed-destination-cidrs: %w", err)
	}
	if o.ClusterServices, err = destination.ParseCIDRs(d.services); err != nil {
		return nil, fmt.Errorf("--cluster-service-cidrs: %w", err)
	}
	if o.ClusterPods, err = destination.ParseCIDRs(d.pods); err != nil {
		return nil, fmt.Errorf("--cluster-pod-cidrs: %w", err)
	}
	return destination.New(o), nil
}
