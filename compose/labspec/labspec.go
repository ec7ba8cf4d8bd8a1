// Package labspec derives a lab process's configuration from a cluster
// config: link speeds scaled so the CPU keeps up (the default is 1 Gb/s
// per plane at the host links, fabric links by the same factor), real-time
// pacing, and a digest of the result that a host and the fabric compare
// when a host attaches (both must scale the same config the same way).
// It knows config and units only.
package labspec

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/units"
)

// DefaultPlaneBps is the host-link speed per plane a lab runs at unless
// told otherwise.
const DefaultPlaneBps = 1_000_000_000

// MinPlaneBps and MaxPlaneBps bound --plane-speed: below 1 Mb/s a 4 KiB
// frame takes 33 ms to serialize; above 100 Gb/s no CPU keeps up.
const (
	MinPlaneBps = 1_000_000
	MaxPlaneBps = 100_000_000_000
)

// Scaling is what a lab changed in the config's link speeds.
type Scaling struct {
	// ConfiguredHostBps and ConfiguredFabricBps are the config's speeds.
	ConfiguredHostBps   uint64 `json:"configured_host_bps"`
	ConfiguredFabricBps uint64 `json:"configured_fabric_bps"`
	// HostBps and FabricBps are the speeds the lab runs at.
	HostBps   uint64 `json:"host_bps"`
	FabricBps uint64 `json:"fabric_bps"`
	// Factor is HostBps / ConfiguredHostBps (≤ 1 scales down).
	Factor float64 `json:"factor"`
}

// String is the one-line form processes log and report.
func (s Scaling) String() string {
	return fmt.Sprintf("host links %s (configured %s), fabric links %s (configured %s): ×%.4g",
		units.FormatSpeed(s.HostBps), units.FormatSpeed(s.ConfiguredHostBps),
		units.FormatSpeed(s.FabricBps), units.FormatSpeed(s.ConfiguredFabricBps), s.Factor)
}

// Lab is a resolved lab configuration.
type Lab struct {
	Config  config.Config
	Scaling Scaling
	// Digest is sha256 over the resolved config's JSON: equal on every
	// process of one lab.
	Digest [32]byte
}

// CheckPlaneBps validates a --plane-speed value (flag is the flag's name
// for the message).
func CheckPlaneBps(flag string, bps uint64) error {
	if bps < MinPlaneBps || bps > MaxPlaneBps {
		return fmt.Errorf("%s: %s is outside %s..%s", flag, units.FormatSpeed(bps), units.FormatSpeed(MinPlaneBps), units.FormatSpeed(MaxPlaneBps))
	}
	return nil
}

// Resolve builds the lab configuration from a config file (path, "" for
// the defaults) and --set overrides, with the host links at planeBps and
// the fabric links scaled by the same factor, in real-time pacing. Errors
// name the field, as config.Load's do.
func Resolve(path string, sets []string, planeBps uint64) (Lab, error) {
	if err := CheckPlaneBps("--plane-speed", planeBps); err != nil {
		return Lab{}, err
	}
	base, err := config.Load(path, sets)
	if err != nil {
		return Lab{}, err
	}
	sc := Scaling{ConfiguredHostBps: base.Fabric.HostLinkBps(), ConfiguredFabricBps: base.Fabric.FabricLinkBps(), HostBps: planeBps}
	if sc.ConfiguredHostBps == 0 {
		return Lab{}, fmt.Errorf("fabric.hostLinkSpeed: no speed to scale")
	}
	sc.Factor = float64(planeBps) / float64(sc.ConfiguredHostBps)
	sc.FabricBps = uint64(math.Round(float64(sc.ConfiguredFabricBps) * sc.Factor))
	if sc.FabricBps == 0 {
		sc.FabricBps = 1
	}
	scaled := append(append([]string(nil), sets...),
		"fabric.hostLinkSpeed="+units.FormatSpeed(sc.HostBps),
		"fabric.fabricLinkSpeed="+units.FormatSpeed(sc.FabricBps),
		"run.pacing="+config.PacingRealtime)
	c, err := config.Load(path, scaled)
	if err != nil {
		return Lab{}, fmt.Errorf("the config scaled to %s per plane: %w", units.FormatSpeed(planeBps), err)
	}
	return Lab{Config: c, Scaling: sc, Digest: Digest(c)}, nil
}

// Digest is sha256 over c's JSON encoding.
func Digest(c config.Config) [32]byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("labspec: config does not encode: %v", err)) // a Config always does
	}
	return sha256.Sum256(b)
}

// HostName is the name a lab gives host h (the fabric's port names use it:
// h3/p0 is host 3's NIC port on plane 0).
func HostName(h int) string { return fmt.Sprintf("h%d", h) }
