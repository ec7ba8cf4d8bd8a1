package config

import (
	"fmt"
	"slices"
)

// A preset is a scaled-down version of one of the paper's clusters. It sets
// only the fabric shape and link speeds; everything else keeps its default
// (or explicit) value.
type preset struct {
	planes     int
	hostsPerT0 int
	t0PerPlane int
	t1PerPlane int
	speed      string // host and fabric links
}

var presets = map[string]preset{
	// A: 4 planes of 200G.
	"A": {planes: 4, hostsPerT0: 4, t0PerPlane: 4, t1PerPlane: 4, speed: "200G"},
	// B: 8 planes of 100G.
	"B": {planes: 8, hostsPerT0: 4, t0PerPlane: 4, t1PerPlane: 4, speed: "100G"},
	// C: 4 planes of 100G.
	"C": {planes: 4, hostsPerT0: 4, t0PerPlane: 4, t1PerPlane: 4, speed: "100G"},
	// D: a single 400G plane.
	"D": {planes: 1, hostsPerT0: 4, t0PerPlane: 4, t1PerPlane: 4, speed: "400G"},
}

// PresetNames lists the valid non-empty fabric.preset values.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ApplyPreset sets c.Fabric.Preset to name and, for a known preset, the
// topology ("clos"), planes, hostsPerT0, t0PerPlane, t1PerPlane, hosts and
// both link speeds. The empty name only clears Fabric.Preset. An unknown
// name is recorded too (so Validate reports it) and returns an error.
func ApplyPreset(c *Config, name string) error {
	c.Fabric.Preset = name
	if name == "" {
		return nil
	}
	p, ok := presets[name]
	if !ok {
		return fmt.Errorf("unknown preset %q (want one of %v)", name, PresetNames())
	}
	f := &c.Fabric
	f.Topology = TopologyClos
	f.Planes = p.planes
	f.HostsPerT0 = p.hostsPerT0
	f.T0PerPlane = p.t0PerPlane
	f.T1PerPlane = p.t1PerPlane
	f.Hosts = p.hostsPerT0 * p.t0PerPlane
	f.K = 0
	f.HostLinkSpeed = p.speed
	f.FabricLinkSpeed = p.speed
	return nil
}
