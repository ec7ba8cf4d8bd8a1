package cluster

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// HtsimFatTreeSets is htsim's fat-tree permutation scenario (uet-htsim
// main_uec.cpp defaults) as config overrides (key=value, for config.Load
// or --set): a k-ary 3-tier fat-tree (k=16: 1024 hosts) of 100 Gb/s links
// with 1 µs each, uSID forwarding, no preamble/IFG (htsim has none),
// 4150-byte data packets on the wire, queues of 178 KiB (1 BDP) with
// trimming, RED/ECN from 0.2 to 0.8 BDP with probability 1 at the top and
// marking on every hop including the last (as htsim does), MRC with NSCC,
// payload elided.
//
// A full data packet is 4150 bytes on the wire: Ethernet 14 + outer IPv6
// 40 + the IPv6 packet (fabric.mtu = 4092: IPv6 40, UDP 8, MRC headers 36,
// 4004 payload bytes, ICRC 4) + FCS 4.
func HtsimFatTreeSets(k int) []string {
	mtu := HtsimWirePacket - 18 - 40 // Ethernet + FCS, outer IPv6
	return []string{
		"fabric.topology=fattree", "fabric.k=" + strconv.Itoa(k), "fabric.planes=1",
		"fabric.hostLinkSpeed=100G", "fabric.fabricLinkSpeed=100G", "fabric.hostLinkDelay=1us", "fabric.fabricLinkDelay=1us",
		"fabric.forwarding=usid", "fabric.ifgBytes=0", "fabric.mtu=" + strconv.Itoa(mtu),
		"fabric.queue.bufferBytes=" + strconv.Itoa(HtsimQueueBytes),
		"fabric.queue.ecn.enabled=true", "fabric.queue.ecn.kminBytes=" + strconv.Itoa(HtsimQueueBytes/5),
		"fabric.queue.ecn.kmaxBytes=" + strconv.Itoa(HtsimQueueBytes*4/5), "fabric.queue.ecn.pmax=1", "fabric.queue.ecn.lastHop=true",
		"fabric.queue.trim.enabled=true", "fabric.queue.trim.sizeBytes=128", "fabric.queue.pfc.enabled=false",
		"transport.kind=mrc", "transport.qpsPerConnection=1", "transport.payload=elided", "transport.mrc.nscc=true",
		"transport.mrc.pmtu=" + strconv.Itoa(mtu-config.MRCPacketOverhead),
	}
}

// HtsimFatTreeConfig is the validated config of HtsimFatTreeSets with
// the given seed.
func HtsimFatTreeConfig(k int, seed uint64) (config.Config, error) {
	return config.Load("", append(HtsimFatTreeSets(k), "seed="+strconv.FormatUint(seed, 10)))
}

// htsim's scenario constants.
const (
	HtsimWirePacket = 4150      // bytes of a full data packet on the wire
	HtsimQueueBytes = 178 << 10 // 1 BDP of 100 Gb/s × ~14.6 µs
	HtsimFlowBytes  = 2_000_000 // bytes per flow of the permutation
)

// Derangement returns a seeded random permutation of 0..n-1 without fixed
// points (n ≥ 2): Sattolo's algorithm, which draws a uniformly random
// cyclic permutation — one cycle through every host.
func Derangement(seed uint64, n int) []int {
	r := sim.NewStream(seed, "cluster/permutation")
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.IntN(i)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// PermFlow is one flow of a permutation run.
type PermFlow struct {
	Src, Dst   int
	Bytes      uint64 // completed at the requester
	Placed     uint64 // placed into memory at the responder
	Start, End sim.Time
}

// FCT is the flow completion time: post to the requester's completion.
func (f PermFlow) FCT() time.Duration { return time.Duration(f.End - f.Start) }

// PermResult is the outcome of a permutation run.
type PermResult struct {
	Flows      []PermFlow
	SimTime    sim.Time // when the last flow completed
	Events     uint64   // loop events executed
	PacketHops uint64   // frames delivered by links (every hop of every packet)
	// Transport totals over all QPs.
	DataPackets, Retransmissions, Timeouts, Trims uint64
	// Lost counts the frames the fabric dropped (full buffers, dead links
	// or switches, link loss and corruption); Duplicates the data packets
	// responders received twice — each one a retransmission that was not
	// needed.
	Lost, Duplicates uint64
	BaseRTT          time.Duration
}

// TimeoutsWithoutLoss is how many timeouts cannot be explained by a packet
// the fabric trimmed or lost: timeouts − (trims + losses), at least 0. A
// timer that fires on a packet still queued somewhere counts here; with a
// retransmission timeout that covers the path's queueing it is 0.
func (r PermResult) TimeoutsWithoutLoss() uint64 {
	if lost := r.Trims + r.Lost; r.Timeouts > lost {
		return r.Timeouts - lost
	}
	return 0
}

// FCTStats returns the mean, minimum and maximum flow completion time.
func (r PermResult) FCTStats() (mean, lo, hi time.Duration) {
	if len(r.Flows) == 0 {
		return 0, 0, 0
	}
	var sum time.Duration
	lo = r.Flows[0].FCT()
	for _, f := range r.Flows {
		d := f.FCT()
		sum += d
		lo, hi = min(lo, d), max(hi, d)
	}
	return sum / time.Duration(len(r.Flows)), lo, hi
}

// RunPermutation starts one flow of size bytes from every host h to
// perm[h] (perm[h] == h: no flow) at the current time, one QP per flow and
// one work request (a Write with immediate) per flow, runs the loop until
// every flow completed, and checks that each did: every byte acknowledged
// at the requester and placed at the responder, no work request in error.
func (c *Cluster) RunPermutation(perm []int, size uint64) (PermResult, error) {
	if len(perm) > len(c.Hosts) {
		return PermResult{}, fmt.Errorf("cluster: permutation of %d hosts on %d", len(perm), len(c.Hosts))
	}
	type flow struct {
		pair Pair
		tr   *Transfer
	}
	var flows []flow
	var done atomic.Int64 // completions land on several partitions' goroutines
	for a, b := range perm {
		if a == b {
			continue
		}
		ps, err := c.Connect(a, b)
		if err != nil {
			return PermResult{}, err
		}
		tr, err := c.StartTransfer(ps[0], c.Region(a, size, nil), c.Region(b, size, nil), size, size)
		if err != nil {
			return PermResult{}, err
		}
		inner := ps[0].A.CQ.Handler
		ps[0].A.CQ.Handler = func(x verbs.Completion) {
			inner(x)
			if tr.Done() {
				done.Add(1)
			}
		}
		flows = append(flows, flow{ps[0], tr})
	}
	c.RunWhile(func() bool { return int(done.Load()) < len(flows) })
	r := PermResult{Events: c.Executed(), BaseRTT: c.BaseRTT()}
	for _, l := range c.Topo.Links {
		r.PacketHops += l.Counters.Packets
	}
	for _, s := range c.Topo.Switches {
		for _, p := range s.Ports {
			r.Trims += p.Counters.Trims
			r.Lost += sum(p.Counters.Drops[:])
		}
	}
	for _, ps := range c.Topo.HostPorts {
		for _, p := range ps {
			r.Lost += sum(p.Counters.Drops[:])
		}
	}
	for _, l := range c.Topo.Links {
		r.Lost += l.Counters.Lost + l.Counters.DroppedDown + l.Counters.Corrupted
	}
	for _, f := range flows {
		tr := f.tr
		if !tr.Done() {
			return r, fmt.Errorf("cluster: flow %d→%d stalled at %v", f.pair.A.Host, f.pair.B.Host, c.Now())
		}
		if len(tr.Errors) > 0 {
			return r, fmt.Errorf("cluster: flow %d→%d: %v", f.pair.A.Host, f.pair.B.Host, tr.Errors[0].Status)
		}
		r.SimTime = max(r.SimTime, tr.End)
		sa, sb := f.pair.A.T.Stats(), f.pair.B.T.Stats()
		r.DataPackets += sa.DataPacketsSent
		r.Retransmissions += sa.Retransmissions
		r.Timeouts += sa.Timeouts
		r.Duplicates += sb.DuplicatesReceived
		r.Flows = append(r.Flows, PermFlow{Src: f.pair.A.Host, Dst: f.pair.B.Host, Bytes: tr.Completed,
			Placed: sb.BytesPlaced, Start: tr.Start, End: tr.End})
	}
	return r, nil
}

func sum(xs []uint64) uint64 {
	var n uint64
	for _, x := range xs {
		n += x
	}
	return n
}

// IdealFCT is htsim's ideal flow completion time from host a to host b:
// size payload bytes at the host link rate plus the pair's zero-load RTT
// (headers make the real floor a few per cent higher).
func (c *Cluster) IdealFCT(a, b int, size uint64) time.Duration {
	return time.Duration(float64(size)*8/float64(c.hostRate())*1e9) + c.PairRTT(a, b)
}

// ClusterBSets is the paper's cluster B at full scale as config overrides:
// 8 planes of 100 Gb/s, 512 T0 and 256 T1 switches per plane, 256 hosts
// per T0 — 131 072 NICs — SRv6 uSID forwarding, MRC with NSCC, payload
// elided, hosts without netstack (the RDMA path does not use it).
func ClusterBSets() []string {
	return []string{
		"fabric.topology=clos", "fabric.planes=8", "fabric.hostsPerT0=256", "fabric.t0PerPlane=512", "fabric.t1PerPlane=256",
		"fabric.hosts=131072", "fabric.hostLinkSpeed=100G", "fabric.fabricLinkSpeed=100G", "fabric.forwarding=usid",
		"transport.kind=mrc", "transport.qpsPerConnection=1", "transport.payload=elided", "transport.mrc.nscc=true",
		"host.netstack=false", "host.tcp=false",
	}
}

// SpreadPermutation returns a permutation of all hosts in which perT0
// hosts under every T0 (the first perT0 of each subnet) take part — a
// seeded derangement among them — and every other host maps to itself (no
// flow).
func (c *Cluster) SpreadPermutation(seed uint64, perT0 int) []int {
	var picked []int
	for h := range c.Hosts {
		if _, i := c.Topo.HostSubnet(h); i < perT0 {
			picked = append(picked, h)
		}
	}
	perm := make([]int, len(c.Hosts))
	for h := range perm {
		perm[h] = h
	}
	if len(picked) < 2 {
		return perm
	}
	for i, j := range Derangement(seed, len(picked)) {
		perm[picked[i]] = picked[j]
	}
	return perm
}
