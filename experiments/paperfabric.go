package experiments

import (
	"fmt"
	"strconv"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/units"
)

// The RoCE fabric of the transport comparisons (TARGETS T2–T4). The paper
// compares MRC on four 100G planes (SRv6 uSID, PFC off, one QP) with RoCE
// on ONE 400G plane (PFC + DCQCN, BGP/ECMP, 1–16 QPs). exp.roceFabric
// picks it:
//
//   - paper (the default): the RoCE variants run on a single plane whose
//     host and fabric links carry the MRC fabric's whole NIC (planes ×
//     host link speed, planes × fabric link speed: 1 × 400G for preset C),
//     with the same hosts and T0/T1 shape, PFC on (the lossless priority
//     of fabric.queue.pfc.*, static thresholds), ECN preset auto (which
//     resolves to dcqcn-sigcomm15 for RoCE) and DCQCN as configured
//     (transport.roce.cc, default dcqcn_hpcc). MRC is unchanged.
//   - same-planes: RoCE runs on MRC's planes, as MRC's fabric is
//     configured (PFC as configured, off by default). One RoCE QP is then
//     one flow on one plane, a quarter of a 4-plane NIC: a limit the
//     paper's setup does not have.
const (
	roceFabricPaper      = "paper"
	roceFabricSamePlanes = "same-planes"
)

var roceFabricParam = Param{Key: "roceFabric", Default: roceFabricPaper,
	Doc: "paper: RoCE on one plane carrying the whole NIC (planes × link speed, 1 × 400G here) with PFC, same hosts and T0/T1 shape, as published (T2–T4); same-planes: RoCE on MRC's planes (one QP = one plane)"}

// hostsParam is the ranks of the transport comparisons: "cluster" keeps
// the cluster's fabric.hosts; full runs the paper's 64 NICs.
var hostsParam = Param{Key: "hosts", Default: hostsCluster, Full: "64",
	Doc: "hosts (ranks): cluster keeps the cluster's fabric.hosts (16 from the experiment's settings); else a multiple of fabric.hostsPerT0, T0s per plane = hosts / hostsPerT0, T1s and links as configured; full: 64, the published NIC count"}

// hostsCluster is exp.hosts' value that keeps the cluster's fabric.hosts.
const hostsCluster = "cluster"

// maxParamHosts bounds exp.hosts: the paper's setups have 64 NICs; 1024
// is far beyond anything these experiments are sized for.
const maxParamHosts = 1024

// paperRoCESets are the overrides that put a RoCE variant on the fabric
// exp.roceFabric names (none for same-planes).
func paperRoCESets(base config.Config, mode string) []string {
	if mode != roceFabricPaper {
		return nil
	}
	f := base.Fabric
	p := uint64(max(f.Planes, 1))
	return []string{
		"fabric.planes=1",
		"fabric.hostLinkSpeed=" + units.FormatSpeed(p*f.HostLinkBps()),
		"fabric.fabricLinkSpeed=" + units.FormatSpeed(p*f.FabricLinkBps()),
		"fabric.queue.pfc.enabled=true",
	}
}

// hostsSets reads exp.hosts: the overrides that give the cluster that many
// hosts with its T0 and T1 shape (nil for the cluster's own), and the
// host count.
func (r *paramReader) hosts(key string, base config.Config) (sets []string, hosts int) {
	f := base.Fabric
	s := r.p[key]
	if s == hostsCluster {
		return nil, f.Hosts
	}
	n, err := strconv.Atoi(s)
	hpt := max(f.HostsPerT0, 1)
	switch {
	case f.Topology != config.TopologyClos:
		r.bad(key, "%q needs a Clos fabric (fabric.topology is %s); must be %s on a fat-tree", s, f.Topology, hostsCluster)
	case err != nil || n < 2 || n > maxParamHosts:
		r.bad(key, "%q is not an integer in [2, %d]; must be %s (the cluster's fabric.hosts) or a host count in [2, %d]", s, maxParamHosts, hostsCluster, maxParamHosts)
	case n%hpt != 0 || n/hpt > config.MaxSwitchDim:
		r.bad(key, "%q is not a multiple of fabric.hostsPerT0 (%d) with at most %d T0s; must be k × %d for k in [1, %d]", s, hpt, config.MaxSwitchDim, hpt, config.MaxSwitchDim)
	default:
		return []string{"fabric.hosts=" + s, fmt.Sprintf("fabric.t0PerPlane=%d", n/hpt)}, n
	}
	return nil, 0
}

// roceFabricText is what a report says about the RoCE fabric a run used.
func roceFabricText(mode string, base config.Config) string {
	f := base.Fabric
	if mode == roceFabricPaper {
		return fmt.Sprintf("RoCE on one %s plane (the NIC's %d × %s) with PFC, as published", units.FormatSpeed(uint64(max(f.Planes, 1))*f.HostLinkBps()), f.Planes, f.HostLinkSpeed)
	}
	return fmt.Sprintf("RoCE on MRC's %d × %s planes (one QP is one flow on one plane; published: one 400G plane)", f.Planes, f.HostLinkSpeed)
}
