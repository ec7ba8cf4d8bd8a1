package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/vcluster/vcluster/compose/lab"
	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/units"
)

// What the lab processes' commands (fabric, host, lab, bench lab-fabric)
// share: their flag checks and the ready file.

// planeSpeedFlag is --plane-speed's check: a speed with a unit in
// labspec's range.
func planeSpeedFlag() flagCheck {
	allowed := fmt.Sprintf("a speed in [%s, %s] (bits/s with k, M, G, T: powers of 1000, e.g. 100M, 1G)",
		units.FormatSpeed(labspec.MinPlaneBps), units.FormatSpeed(labspec.MaxPlaneBps))
	return flagCheck{allowed, func(s string) error {
		v, err := units.ParseSpeed(s)
		if err != nil {
			return fmt.Errorf("%s is not a speed; must be %s", s, allowed)
		}
		if v < labspec.MinPlaneBps || v > labspec.MaxPlaneBps {
			return outOfRange(s, allowed)
		}
		return nil
	}}
}

// checkHostPort validates a host:port flag (port 0 picks one).
func checkHostPort(flag, v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("--%s: %q: want host:port, e.g. 127.0.0.1:0: %v", flag, v, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--%s: %q: the port must be a number in 0..65535", flag, v)
	}
	return nil
}

// writeReadyFile writes r as JSON to path atomically (lab.WriteFileAtomic,
// readable by its owner only, as a temporary file is made).
func writeReadyFile(path string, r labapi.Ready) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return lab.WriteFileAtomic(path, append(b, '\n'), 0o600)
}
