package config

import (
	"fmt"
	"math"
	"time"
)

// ECN presets (fabric.queue.ecn.preset): each reference's RED thresholds,
// scaled with the port's rate where the reference scales them.
const (
	// ECNAuto (the default) is each transport's own reference: htsim for
	// MRC (uet-htsim, NSCC's reference implementation, marks with its
	// thresholds), dcqcn-sigcomm15 for RoCE (DCQCN's paper, TARGETS T10)
	// and htsim for mprdma, random and orderre (MP-RDMA's window reacts to
	// every marked ACK, as DCTCP's to a single instantaneous-queue
	// threshold; htsim's ramp starts at 0.2 BDP — above DCTCP's K >
	// BDP/7 — and marks every packet from 0.8 BDP, and scales with the
	// port's rate and RTT, where DCQCN's fixed 5 KB / 1 % ramp would mark
	// a per-ACK window barely at all until 200 KB). See
	// Config.EffectiveECN.
	ECNAuto = "auto"
	// ECNDCQCN is the DCQCN paper's (SIGCOMM 2015) 5 KB / 200 KB / 1 % at
	// every rate: TARGETS T10, the project's DCQCN reference.
	ECNDCQCN = "dcqcn-sigcomm15"
	// ECNHPCC is HPCC ns-3's run.py: Kmin 100·bw/25 KB, Kmax 400·bw/25 KB,
	// Pmax 0.2, bw the port's rate in Gb/s (400 KB / 1.6 MB at 100G).
	ECNHPCC = "hpcc"
	// ECNHtsim is uet-htsim main_uec.cpp's default: Kmin 0.2 BDP, Kmax
	// 0.8 BDP, each rounded up to whole packets, probability 1 at Kmax; BDP
	// = the port's rate × the fabric's base RTT.
	ECNHtsim = "htsim"
	// ECNSeed002 is seed 002's table: 100 KB / 200 KB / 0.5.
	ECNSeed002 = "seed002"
	// ECNCustom takes kminBytes, kmaxBytes and pmax as given.
	ECNCustom = "custom"
)

// ECNPresetNames lists the valid fabric.queue.ecn.preset values.
func ECNPresetNames() []string {
	return []string{ECNAuto, ECNDCQCN, ECNHPCC, ECNHtsim, ECNSeed002, ECNCustom}
}

// ECNPresetFor resolves preset auto for a transport kind; any other preset
// is returned as it is.
func ECNPresetFor(preset, kind string) string {
	if preset != ECNAuto {
		return preset
	}
	switch {
	case kind == TransportRoCE:
		return ECNDCQCN
	case IsMPRDMAKind(kind):
		return ECNHtsim
	}
	return ECNHtsim
}

// EffectiveECN is the fabric's ECN config with preset auto resolved for
// c's transport: what the switches mark with.
func (c *Config) EffectiveECN() ECNConfig {
	e := c.Fabric.Queue.ECN
	e.Preset = ECNPresetFor(e.Preset, c.Transport.Kind)
	return e
}

// ECNThresholds are the RED parameters of one port: no mark at or below
// KminBytes of class queue, probability rising linearly to Pmax at
// KmaxBytes, every packet above.
type ECNThresholds struct {
	KminBytes, KmaxBytes int
	Pmax                 float64
}

func (t ECNThresholds) String() string {
	return fmt.Sprintf("Kmin %d B, Kmax %d B, Pmax %g", t.KminBytes, t.KmaxBytes, t.Pmax)
}

// fixedECN are the presets that do not depend on the port.
var fixedECN = map[string]ECNThresholds{
	ECNDCQCN:   {KminBytes: 5_000, KmaxBytes: 200_000, Pmax: 0.01},
	ECNSeed002: {KminBytes: 100_000, KmaxBytes: 200_000, Pmax: 0.5},
}

// ECNRateScaled reports whether preset depends on the port's rate (hpcc)
// or on its bandwidth-delay product (htsim).
func ECNRateScaled(preset string) bool { return preset == ECNHPCC || preset == ECNHtsim }

// Thresholds resolves e for a port of rateBps. baseRTT (the fabric's
// zero-load round trip) and packetBytes (a full data frame as the queue
// counts it) matter only to htsim, which sizes its thresholds in packets
// of the bandwidth-delay product. An unknown preset gives zeros.
func (e ECNConfig) Thresholds(rateBps uint64, baseRTT time.Duration, packetBytes int) ECNThresholds {
	if t, ok := fixedECN[e.Preset]; ok {
		return t
	}
	switch e.Preset {
	case ECNCustom:
		return ECNThresholds{KminBytes: e.KminBytes, KmaxBytes: e.KmaxBytes, Pmax: e.Pmax}
	case ECNHPCC:
		// run.py: kmin = 100·bw/25, kmax = 400·bw/25 in KB (switch-mmu.cc
		// ConfigEcn ×1000), bw in Gb/s: 4 KB and 16 KB per Gb/s.
		return ECNThresholds{KminBytes: int(rateBps / 250_000), KmaxBytes: int(rateBps / 62_500), Pmax: 0.2}
	case ECNHtsim:
		if packetBytes <= 0 {
			return ECNThresholds{}
		}
		// main_uec.cpp: bdp_pkt = ceil(rtt × rate/8 / pkt); ecn_low =
		// ceil(0.2 bdp_pkt) pkts, ecn_high = ceil(0.8 bdp_pkt) pkts;
		// compositequeue marks with probability 1 above ecn_high.
		bdp := math.Ceil(baseRTT.Seconds() * float64(rateBps) / 8 / float64(packetBytes))
		return ECNThresholds{KminBytes: int(math.Ceil(0.2*bdp)) * packetBytes, KmaxBytes: int(math.Ceil(0.8*bdp)) * packetBytes, Pmax: 1}
	}
	return ECNThresholds{}
}

// ECNRates are the link rates of the ports that mark under this fabric
// config: the fabric links, and the host links when ecn.lastHop.
func (f FabricConfig) ECNRates() []uint64 {
	r := []uint64{f.FabricLinkBps()}
	if h := f.HostLinkBps(); f.Queue.ECN.LastHop && h != r[0] {
		r = append(r, h)
	}
	return r
}

// layerECN is Load's rule for one layer (the file, or the --set list)
// of explicit ECN settings, applied after the layers are merged:
//
//   - a layer that names a preset other than custom clears the kminBytes,
//     kmaxBytes and pmax it does not give itself (a lower layer's values
//     belong to the preset it replaces; one it gives is an error Validate
//     reports);
//   - a layer that gives any of those without naming a preset switches
//     the preset to custom. The fields it leaves out keep the values of
//     the preset it replaces when that one is fixed (dcqcn-sigcomm15,
//     seed002, and auto for RoCE); a rate-scaled one (hpcc, htsim, auto
//     for MRC) has no single value to keep, so they are zero and
//     Validate asks for them.
func layerECN(e *ECNConfig, kind string, given map[string]bool) {
	kmin, kmax, pmax := given["fabric.queue.ecn.kminBytes"], given["fabric.queue.ecn.kmaxBytes"], given["fabric.queue.ecn.pmax"]
	var keep ECNThresholds // what the fields not given become
	switch {
	case given["fabric.queue.ecn.preset"]:
		if e.Preset == ECNCustom {
			return
		}
	case !(kmin || kmax || pmax) || e.Preset == ECNCustom:
		return
	default:
		keep = fixedECN[ECNPresetFor(e.Preset, kind)] // zero for a rate-scaled preset
		e.Preset = ECNCustom
	}
	if !kmin {
		e.KminBytes = keep.KminBytes
	}
	if !kmax {
		e.KmaxBytes = keep.KmaxBytes
	}
	if !pmax {
		e.Pmax = keep.Pmax
	}
}
