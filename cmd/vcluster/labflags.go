package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

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

// writeReadyFile writes v as JSON to path atomically (a temp file in the
// same directory, renamed).
func writeReadyFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readyInfo is what --ready-file holds.
type readyInfo struct {
	PID    int    `json:"pid"`
	API    string `json:"api"`
	Tunnel string `json:"tunnel"`
}
