package cluster

import (
	"fmt"

	"github.com/vcluster/vcluster/pathquality"
)

// startPathQuality starts every switch's path-quality control plane
// (fabric.pathQuality on: mode on, or auto with forwarding pathquality) on
// the cluster's Scheduler, from now: under forwarding pathquality it sets
// the switches' weights, under any other it measures and advertises only.
// On a run in windows its sampling and advertising are global events, so
// they read every partition's counters at the same virtual time as the
// single loop does.
func (c *Cluster) startPathQuality() error {
	if !c.Config.PathQualityEnabled() {
		return nil
	}
	cp, err := pathquality.New(c.Topo, c.Scheduler(), c.Config.PathQuality())
	if err != nil {
		return fmt.Errorf("fabric.pathQuality.%w", err) // its errors start with the key
	}
	c.PathQuality = cp
	return nil
}
