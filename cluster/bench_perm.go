package cluster

import (
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
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

// RoCEFatTreeSets is the permutation scenario for RoCE on a k-ary fat-tree
// as config overrides: the fat-tree of HtsimFatTreeSets (100 Gb/s links of
// 1 µs each) with ECMP forwarding, the default MTU and buffers, PFC on,
// ECN at its default preset (auto: the DCQCN paper's 5 KB / 200 KB / 1%
// for RoCE) and RoCE with one QP per flow at its default congestion
// control (transport.roce.cc; give another preset after these), payload
// elided.
func RoCEFatTreeSets(k int) []string {
	return []string{
		"fabric.topology=fattree", "fabric.k=" + strconv.Itoa(k), "fabric.planes=1",
		"fabric.hostLinkSpeed=100G", "fabric.fabricLinkSpeed=100G", "fabric.hostLinkDelay=1us", "fabric.fabricLinkDelay=1us",
		"fabric.forwarding=ecmp", "fabric.queue.pfc.enabled=true",
		"transport.kind=roce", "transport.qpsPerConnection=1", "transport.payload=elided",
	}
}

// RoCEClosSets is the permutation experiment's fabric (cluster D: one
// 400G plane) grown to hostsPerT0 hosts under each of as many T0s, with as
// many T1s (non-blocking), ECMP, PFC on, ECN at its default preset and
// RoCE with one QP per flow, payload elided. hostsPerT0 = 8 is a 64-host
// Clos.
func RoCEClosSets(hostsPerT0 int) []string {
	n := strconv.Itoa(hostsPerT0)
	return []string{
		"fabric.preset=D", "fabric.hostsPerT0=" + n, "fabric.t0PerPlane=" + n, "fabric.t1PerPlane=" + n,
		"fabric.hosts=" + strconv.Itoa(hostsPerT0*hostsPerT0),
		"fabric.forwarding=ecmp", "fabric.queue.pfc.enabled=true",
		"transport.kind=roce", "transport.qpsPerConnection=1", "transport.payload=elided",
	}
}

// LineFraction is a flow's goodput — its bytes over its completion time
// — as a fraction of lineBps.
func (f PermFlow) LineFraction(lineBps float64) float64 {
	if f.End <= f.Start || lineBps <= 0 {
		return 0
	}
	return float64(f.Bytes) * 8 / (float64(f.End-f.Start) / 1e9) / lineBps
}

// MeanLineFraction is the mean over the flows of LineFraction at the host
// link rate: the permutation experiment's row.
func (r PermResult) MeanLineFraction(c *Cluster) float64 {
	if len(r.Flows) == 0 {
		return 0
	}
	var s float64
	for _, f := range r.Flows {
		s += f.LineFraction(float64(c.hostRate()))
	}
	return s / float64(len(r.Flows))
}

// PermPaths records which links carry each flow of a permutation: every
// port's outbound data frames (origLen ≥ MinFrame) whose source and
// destination hosts are a flow a → perm[a] add the port's link to a's
// path. Attach it before the run (TracePaths); it changes nothing in the
// simulation.
type PermPaths struct {
	c     *Cluster
	perm  []int
	links map[*fabric.Link]int
	// Links[a] is the indices (in Topo.Links) of the links flow a →
	// perm[a] used, in the order first seen.
	Links [][]int
	// MinFrame is the smallest frame counted as data (ACKs, CNPs and PFC
	// frames are smaller).
	MinFrame int
}

type pathTap struct {
	p    *PermPaths
	link int
}

func (t pathTap) TapFrame(_ int64, dir pcap.Direction, frame []byte, origLen int) {
	if dir != pcap.DirOutbound || origLen < t.p.MinFrame {
		return
	}
	t.p.record(frame, t.link)
}

func (p *PermPaths) record(frame []byte, link int) {
	const src, dst = fabric.EthHeaderLen + 8, fabric.EthHeaderLen + 24
	if len(frame) < dst+16 {
		return
	}
	topo := p.c.Topo
	a, _, ok := topo.HostOf(frame[src : src+16])
	if !ok || a >= len(p.perm) {
		return
	}
	b, _, ok := topo.HostOf(frame[dst : dst+16])
	if !ok {
		// uSID: the outer destination is the path; the host is inside.
		in := fabric.EthHeaderLen + fabric.IPv6HeaderLen + 24
		if len(frame) < in+16 {
			return
		}
		if b, _, ok = topo.HostOf(frame[in : in+16]); !ok {
			return
		}
	}
	if p.perm[a] != b {
		return
	}
	for _, l := range p.Links[a] {
		if l == link {
			return
		}
	}
	p.Links[a] = append(p.Links[a], link)
}

// TracePaths taps every port of c to record the links of perm's flows. A
// partitioned cluster (ports on several goroutines) is refused.
func (c *Cluster) TracePaths(perm []int) (*PermPaths, error) {
	if c.par != nil && c.par.workers > 1 {
		return nil, fmt.Errorf("cluster: TracePaths on a partitioned cluster")
	}
	p := &PermPaths{c: c, perm: perm, links: map[*fabric.Link]int{}, Links: make([][]int, len(perm)),
		MinFrame: c.pmtu() / 2}
	for i, l := range c.Topo.Links {
		p.links[l] = i
	}
	tap := func(pt *fabric.Port) {
		if i, ok := p.links[pt.Tx]; ok && pt.Tx != nil {
			pt.Tap(pathTap{p, i})
		}
	}
	for _, s := range c.Topo.Switches {
		for _, pt := range s.Ports {
			tap(pt)
		}
	}
	for _, ps := range c.Topo.HostPorts {
		for _, pt := range ps {
			tap(pt)
		}
	}
	return p, nil
}

// Fluid returns the fluid model of the traced collisions: flows of size
// bytes each on the links they used, every link's capacity its rate, all
// starting at once and sharing each link max-min fairly, the shares
// recomputed whenever a flow ends (MaxMinFluid). Per flow a → perm[a] (0
// where there is no flow): its max-min share at the start and its
// goodput (size over its fluid completion time), both as fractions of the
// host link rate.
func (p *PermPaths) Fluid(size uint64) (share, goodput []float64) {
	caps := make([]float64, len(p.c.Topo.Links))
	for i, l := range p.c.Topo.Links {
		caps[i] = float64(l.Rate)
	}
	sizes := make([]float64, len(p.Links))
	for a, ls := range p.Links {
		if len(ls) > 0 {
			sizes[a] = float64(size) * 8
		}
	}
	rate, fct := MaxMinFluid(p.Links, caps, sizes)
	line := float64(p.c.hostRate())
	share, goodput = make([]float64, len(rate)), make([]float64, len(rate))
	for a := range rate {
		if sizes[a] > 0 && fct[a] > 0 {
			share[a], goodput[a] = rate[a]/line, sizes[a]/fct[a]/line
		}
	}
	return share, goodput
}

// MaxMinFluid is a fluid model of flows sharing links: flow i of sizes[i]
// bits crosses the links paths[i] (indices into caps, in bits/s); a flow
// with no links or no bits takes no part. All start at 0; at every moment
// the rates are the max-min fair allocation (progressive filling: raise
// every unfrozen flow's rate together until a link fills, freeze that
// link's flows, repeat), recomputed whenever a flow completes. It returns
// each flow's initial max-min rate (bits/s) and its completion time
// (seconds); 0 for flows that take no part.
func MaxMinFluid(paths [][]int, caps, sizes []float64) (initial, fct []float64) {
	n := len(paths)
	initial, fct = make([]float64, n), make([]float64, n)
	left := make([]float64, n)
	active := make([]bool, n)
	na := 0
	for i := range paths {
		if len(paths[i]) > 0 && sizes[i] > 0 {
			active[i], left[i] = true, sizes[i]
			na++
		}
	}
	rate := make([]float64, n)
	now, first := 0.0, true
	for na > 0 {
		MaxMinRates(paths, caps, active, rate)
		if first {
			copy(initial, rate)
			first = false
		}
		dt := math.Inf(1)
		for i := range paths {
			if active[i] && rate[i] > 0 {
				dt = min(dt, left[i]/rate[i])
			}
		}
		if math.IsInf(dt, 1) {
			break // every remaining flow crosses a link of capacity 0
		}
		now += dt
		for i := range paths {
			if !active[i] {
				continue
			}
			left[i] -= rate[i] * dt
			if left[i] <= sizes[i]*1e-12 {
				active[i], fct[i] = false, now
				na--
			}
		}
	}
	return initial, fct
}

// MaxMinRates sets rate[i] for the active flows to the max-min fair
// allocation on caps by progressive filling (one step of MaxMinFluid;
// the permutation experiment's fluid reference uses it too).
func MaxMinRates(paths [][]int, caps []float64, active []bool, rate []float64) {
	frozen := make([]bool, len(paths))
	free := append([]float64(nil), caps...)
	users := make([]int, len(caps))
	for i, ls := range paths {
		rate[i] = 0
		if !active[i] {
			frozen[i] = true
			continue
		}
		for _, l := range ls {
			users[l]++
		}
	}
	for {
		// The smallest equal increment that fills a link.
		inc, tight := math.Inf(1), -1
		for l, u := range users {
			if u > 0 && free[l]/float64(u) < inc {
				inc, tight = free[l]/float64(u), l
			}
		}
		if tight < 0 {
			return
		}
		for i, ls := range paths {
			if frozen[i] {
				continue
			}
			rate[i] += inc
			for _, l := range ls {
				free[l] -= inc
			}
		}
		// Freeze the flows on every link now full.
		for i, ls := range paths {
			if frozen[i] {
				continue
			}
			for _, l := range ls {
				if free[l] <= caps[l]*1e-12 {
					frozen[i] = true
					for _, m := range ls {
						users[m]--
					}
					break
				}
			}
		}
	}
}
