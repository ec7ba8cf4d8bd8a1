package fabric

import (
	"encoding/binary"
	"math/bits"
	"time"

	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/sim"
)

// Device owns ports and takes the frames they receive: a Switch here, a NIC
// in package endpoint. Ingress takes ownership of p.
type Device interface {
	Ingress(p *Packet, in *Port)
}

// TxReadyNotifier is told when a port finished serializing a frame, so a
// NIC can pull the next segment from its transports (back-pressure instead
// of host-side drops).
type TxReadyNotifier interface {
	TxReady(pt *Port)
}

// ECNConfig is RED/ECN marking on a port's data queues.
type ECNConfig struct {
	Enabled    bool
	Kmin, Kmax int     // bytes of the class queue at enqueue
	Pmax       float64 // marking probability at Kmax
}

// TrimConfig is packet trimming on buffer admission failure.
type TrimConfig struct {
	Enabled    bool
	Size       int // bytes kept of the frame (default 128)
	QueueBytes int // limit of the trimmed-header queue; trimmed packets beyond it drop
}

// PFCConfig is priority flow control: the lossless classes, the ingress
// thresholds at switches, and the storm watchdog at egress.
type PFCConfig struct {
	Enabled   bool
	Lossless  uint8 // bit c set: class c is lossless
	Xoff, Xon int   // static mode: ingress bytes per (port, class)
	Headroom  int   // bytes absorbed above the pause threshold before dropping
	// Dynamic selects HPCC's switch MMU (switch-mmu.cc) instead of the
	// static Xoff/Xon: a switch-wide shared buffer whose free part, shifted
	// right per port, is the pause threshold (see IngressAccounting).
	Dynamic bool
	// SharedBuffer is the switch's buffer in dynamic mode; 0: the sum of
	// its ports' BufferBytes.
	SharedBuffer int
	// Reserve is the bytes each (port, lossless class) holds outside the
	// shared buffer; ResumeOffset the hysteresis of resume (HPCC: 4 KB
	// and 3 KB).
	Reserve, ResumeOffset int
	// NICRate is the host link rate: a port at it gets HPCC's shift 3
	// (threshold = free/8), one less per doubling of its rate above it.
	NICRate     uint64
	WatchdogOn  bool
	Detection   time.Duration
	Restoration time.Duration
	WatchdogAct WatchdogAction
}

func (c *PFCConfig) lossless(class uint8) bool {
	return c != nil && c.Enabled && c.Lossless&(1<<class) != 0
}

// PortConfig is shared by many ports (one value per port role).
type PortConfig struct {
	BufferBytes int // shared by the data classes of one egress port
	IFGBytes    int // preamble + SFD + inter-frame gap added to every frame
	ECN         ECNConfig
	Trim        TrimConfig
	PFC         *PFCConfig
	Classes     ClassMap
}

// Drop reasons counted per port.
const (
	DropBuffer     = iota // egress buffer full, not trimmable
	DropTrimQueue         // trimmed header found its queue full
	DropHeadroom          // lossless class overflowed PFC headroom
	DropWatchdog          // PFC watchdog in drop mode
	DropNoRoute           // no FIB / uSID entry
	DropHopLimit          // hop limit exhausted
	DropMalformed         // not a parsable frame
	DropSwitchDown        // the switch is down (crashed, rebooting)
	DropDuplicate         // a programmable ToR's duplicate FReTx copy (tor_multicast.go)
	numDropReasons
)

// DropReasonNames names the drop reasons in counters output.
var DropReasonNames = [numDropReasons]string{"buffer", "trim_queue", "pfc_headroom", "pfc_watchdog", "no_route", "hop_limit", "malformed", "switch_down", "duplicate"}

// PortCounters count one port's traffic in both directions.
type PortCounters struct {
	TxPackets, TxBytes, RxPackets, RxBytes uint64
	MaxQueueBytes                          int
	Drops                                  [numDropReasons]uint64
	ECNMarks, Trims                        uint64
	PauseTx, ResumeTx, PauseRx, ResumeRx   uint64
	StormsDetected, StormsRestored         uint64
	// Where frames enter and leave the fabric (Topology.Conservation).
	// Sent: frames handed to the port from outside the fabric — by its
	// device through Enqueue (not by switch forwarding), the MAC control
	// frames it generated, and the copies a programmable ToR made of an
	// FReTx that came in on it (tor_multicast.go). Delivered: frames the
	// port handed to a device that is not a switch (a NIC), and valid MAC
	// control frames it took.
	Sent, Delivered uint64
	// BlackHoled: frames that arrived on this port and that its switch
	// black-holed. Not a drop reason: to the port's drop counters a black
	// hole stays silent, like the gray failures it models.
	BlackHoled uint64
}

// QueueCounters count one egress traffic class.
type QueueCounters struct {
	EnqPackets, TxPackets, TxBytes uint64
	Drops, ECNMarks, Trims         uint64
	MaxBytes                       int
}

// Port events.
const (
	evTxDone = iota
	evPauseExpired
	evWatchdog
)

// Port is one end of a cable: the egress side (per-class queues, the
// scheduler, serialization onto Tx) and the ingress side (frames from the
// peer's link, PFC frames). A Device owns it.
type Port struct {
	// The fields are ordered by use, so that the cache lines a frame
	// touches at a million-port scale are few and can be prefetched
	// (prefetchHot): line 0 is what admission and transmission read, line 1
	// what reception reads and both count (device hooks, the Tx/Rx
	// counters). Optional features (PFC accounting, storm watchdog, pcap
	// tap, MAC control frames) are flagged in line 0 and kept further on.
	// Every port starts a line: fabric allocates them padded (linePort).

	Tx        *Link       // outgoing direction of the cable
	cfg       *PortConfig //
	loop      *sim.Loop
	pq        *portQueues // counters and pause state: nil until first needed
	bytes     int32       // data-class bytes held against BufferBytes
	hdrBytes  int32       // bytes in the control and trimmed classes, and MAC control frames
	busyUntil sim.Time    // when the frame on the wire ends its serialization
	rem       uint64      // sub-nanosecond serialization remainder
	// qmask bit c: queues[c] is not empty; paused bit c:
	// pq.pausedUntil[c] was set (it may have passed).
	qmask  uint8
	paused uint8
	// txPending: an evTxDone is posted for busyUntil. A switch port whose
	// queue empties needs no such event: the next frame to arrive starts at
	// once or posts one (see kick), so an idle port costs one event per
	// frame.
	txPending bool
	feat      uint8 // feat* bits: which optional features are set
	maxQ      int32 // Counters.MaxQueueBytes, checked here on every frame

	Owner    Device
	Notify   TxReadyNotifier
	Counters PortCounters // its first four fields end line 1

	acct *IngressAccounting // the owning switch's PFC state; nil at NICs
	wd   *watchdog
	tap  FrameTap
	ctrl packetFIFO // MAC control frames: sent before any class
	Peer *Port      // the other end
	pool *Pool
	// QCounters count each egress class. Until the port first queues a
	// frame it points at a shared array of zeros (never written).
	QCounters  *[NumClasses]QueueCounters
	wakeAt     sim.Time
	Index      int32                  // index within the owning device
	HostFacing bool                   // a switch port facing a NIC (last hop)
	queues     [NumClasses]packetFIFO // the class queues
	rng        sim.FastRand
	Name       string
	MAC        [6]byte
	obs        *portObs // telemetry and HDC (telemetry.go, hdc.go); nil: neither
}

// Port.feat bits.
const (
	featAcct = 1 << iota // acct != nil
	featWd               // wd != nil
	featTap              // tap != nil
	featCtrl             // ctrl is not empty
	featTele             // telemetry on: obs keeps occupancy integrals
	featHDC              // high-delay capture on: obs.hdc is the collector
)

// portQueues is the egress state a port needs only once traffic reaches
// it: allocated on first use, so a million-port fabric whose ports mostly
// idle stays small (a port is ~0.4 KiB without it, ~1.1 KiB with it).
type portQueues struct {
	qc          [NumClasses]QueueCounters
	pausedUntil [NumClasses]sim.Time
}

// qpush appends p to class c's queue (the port's queues exist) and
// accounts its bytes. Its one caller, enqueue, does the telemetry: with
// it here qpush would no longer inline.
func (pt *Port) qpush(c uint8, p *Packet) {
	pt.queues[c].push(p)
	pt.qmask |= 1 << c
	if c == ClassControl || c == ClassTrimmed {
		pt.hdrBytes += int32(p.WireLen)
	} else {
		pt.bytes += int32(p.WireLen)
	}
}

// ctrlPush queues a MAC control frame.
func (pt *Port) ctrlPush(p *Packet) {
	pt.ctrl.push(p)
	pt.hdrBytes += int32(p.WireLen)
	pt.feat |= featCtrl
}

// ctrlPop dequeues the oldest MAC control frame, or returns nil.
func (pt *Port) ctrlPop() *Packet {
	if pt.feat&featCtrl == 0 {
		return nil // no need to read the control queue's cache line
	}
	p := pt.ctrl.pop()
	pt.hdrBytes -= int32(p.WireLen)
	if pt.ctrl.n == 0 {
		pt.feat &^= featCtrl
	}
	return p
}

// qpop removes the head of class c's non-empty queue and un-accounts it.
func (pt *Port) qpop(c int) *Packet {
	f := &pt.queues[c]
	p := f.pop()
	if f.n == 0 {
		pt.qmask &^= 1 << c
	}
	if c == ClassControl || c == ClassTrimmed {
		pt.hdrBytes -= int32(p.WireLen)
	} else {
		pt.bytes -= int32(p.WireLen)
	}
	if pt.feat&featTele != 0 {
		pt.teleNote(c, -p.WireLen)
	}
	return p
}

// idleQueueCounters is what QCounters shows before a port's first frame.
var idleQueueCounters [NumClasses]QueueCounters

// q returns the port's queues, allocating them on first use.
func (pt *Port) q() *portQueues {
	if pt.pq == nil {
		pt.pq = &portQueues{}
		pt.QCounters = &pt.pq.qc
	}
	return pt.pq
}

// NewPort returns a port using cfg (shared, not copied).
func NewPort(loop *sim.Loop, pool *Pool, name string, cfg *PortConfig) *Port {
	lp := new(linePort) // padded: the port starts a line
	pt := &lp.Port
	pt.init(loop, pool, name, cfg)
	return pt
}

// init sets up a zero port in place (NewPort, or a switch's port slab).
func (pt *Port) init(loop *sim.Loop, pool *Pool, name string, cfg *PortConfig) {
	pt.Name, pt.cfg, pt.loop, pt.pool = name, cfg, loop, pool
	pt.rng = sim.NewFastRand(loop.Seed(), "port/"+name)
	pt.QCounters = &idleQueueCounters
}

// Config returns the port's configuration.
func (pt *Port) Config() *PortConfig { return pt.cfg }

// SetConfig replaces the port's configuration (before traffic flows).
func (pt *Port) SetConfig(c *PortConfig) { pt.cfg = c }

// FrameTap takes a copy of the frames a tapped port sends and receives.
// ts is the virtual time in nanoseconds, dir DirOutbound for a frame the
// port sends and DirInbound for one it receives, frame the bytes from the
// Ethernet header on (the stored bytes: less than the frame when its
// payload is elided) and origLen the frame's length on the wire without
// FCS. frame is only valid during the call. TapFrame runs on the port's
// loop, inside the frame's event: it must not block, and should not
// allocate. A *pcap.Writer is a FrameTap (it drops the direction); one
// sink can serve many ports by giving each its own small FrameTap value.
type FrameTap interface {
	TapFrame(ts int64, dir pcap.Direction, frame []byte, origLen int)
}

// Tap sets the port's tap (nil: none), which then sees every frame on
// the cable at this end, in both directions:
//
//   - outbound, each frame the port sends — data, MAC control (PFC)
//     frames, trimmed headers — stamped when its transmission starts;
//   - inbound, each frame the port receives, that is each frame its peer
//     sent that the link delivered, stamped when its last bit arrives
//     (the peer's transmission end plus the propagation delay), the
//     moment the port hands it on.
//
// A frame the link loses, corrupts or drops (link down) is seen outbound
// at the sender only. A port and its peer may be tapped together: the
// peer's outbound copy is stamped a serialization time and a propagation
// delay before this port's inbound one. With no tap a port pays one
// feature-bit test per frame.
func (pt *Port) Tap(t FrameTap) {
	pt.tap = t
	pt.setFeat(featTap, t != nil)
}

// setFeat sets or clears feature bit f.
func (pt *Port) setFeat(f uint8, on bool) {
	if on {
		pt.feat |= f
	} else {
		pt.feat &^= f
	}
}

// setAcct attaches the owning switch's PFC ingress accounting.
func (pt *Port) setAcct(a *IngressAccounting) {
	pt.acct = a
	pt.setFeat(featAcct, a != nil)
}

// QueuedBytes returns the bytes waiting in all classes (not the one on the wire).
func (pt *Port) QueuedBytes() int {
	return int(pt.bytes + pt.hdrBytes)
}

// ClassBytes returns the bytes waiting in class c.
func (pt *Port) ClassBytes(c int) int {
	return pt.queues[c].bytes
}

// Busy reports whether a frame is being serialized.
func (pt *Port) Busy() bool { return pt.loop.Now() < pt.busyUntil }

// kick starts the next frame if the port is idle, or makes sure the end of
// the current one will.
func (pt *Port) kick() {
	if pt.txPending {
		return
	}
	if pt.loop.Now() >= pt.busyUntil {
		pt.startNext()
		return
	}
	pt.txPending = true
	pt.loop.Post(pt.busyUntil, pt, evTxDone)
}

// Paused reports whether class c is paused by PFC now.
func (pt *Port) Paused(c int) bool {
	return pt.paused&(1<<c) != 0 && pt.loop.Now() < pt.pq.pausedUntil[c]
}

func (pt *Port) drop(p *Packet, reason int) {
	pt.Counters.Drops[reason]++
	p.Release()
}

// classOf returns the traffic class of p from its outer DSCP.
func (pt *Port) classOf(p *Packet) uint8 {
	if !p.IsIPv6() {
		return ClassControl
	}
	return pt.cfg.Classes[p.DSCP()]
}

// Enqueue admits p to its class queue (marking, trimming or dropping it as
// the port's configuration says) and starts transmission if idle. It takes
// ownership of p. It is how a device (a NIC, a test, a probe) puts a frame
// into the fabric, counted in Counters.Sent; switches forward with enqueue.
func (pt *Port) Enqueue(p *Packet) {
	pt.Counters.Sent++
	if pt.feat&featHDC != 0 {
		p.hopIn = 0 // not forwarded by this switch: no ingress port
	}
	pt.enqueue(p)
}

// enqueue is Enqueue for a frame already in the fabric (switch forwarding).
func (pt *Port) enqueue(p *Packet) {
	c := pt.classOf(p)
	p.Class = c
	cfg := pt.cfg
	pq := pt.q()
	if pt.feat&featWd != 0 && pt.wd.stormed&(1<<c) != 0 && pt.wd.action == WatchdogDrop {
		if pt.feat&featAcct != 0 {
			pt.acct.release(p)
		}
		pq.qc[c].Drops++
		pt.drop(p, DropWatchdog)
		return
	}
	switch {
	case c == ClassControl || c == ClassTrimmed:
		// Control and trimmed headers have their own bound, outside the
		// shared data buffer.
		if pt.queues[c].bytes+p.WireLen > cfg.Trim.QueueBytes {
			pq.qc[c].Drops++
			pt.drop(p, DropTrimQueue)
			return
		}
	case cfg.PFC.lossless(c):
		// Lossless classes are bounded by ingress PFC accounting, not here.
	case int(pt.bytes)+p.WireLen > cfg.BufferBytes:
		if !cfg.Trim.Enabled || !p.IsIPv6() || !trimmable(p.DSCP()) {
			pq.qc[c].Drops++
			pt.drop(p, DropBuffer)
			return
		}
		pt.trim(p)
		pq.qc[c].Trims++
		pt.Counters.Trims++
		c = ClassTrimmed
		p.Class = c
		if pt.queues[c].bytes+p.WireLen > cfg.Trim.QueueBytes {
			pq.qc[c].Drops++
			pt.drop(p, DropTrimQueue)
			return
		}
	}
	if cfg.ECN.Enabled && c != ClassControl && c != ClassTrimmed && pt.redMark(pt.queues[c].bytes) {
		if p.MarkCE() {
			pt.Counters.ECNMarks++
			pq.qc[c].ECNMarks++
		}
	}
	p.EnqAt = pt.loop.Now()
	pt.qpush(c, p)
	if pt.feat&featTele != 0 {
		pt.teleNote(int(c), p.WireLen)
	}
	qc := &pq.qc[c]
	qc.EnqPackets++
	if b := pt.queues[c].bytes; b > qc.MaxBytes {
		qc.MaxBytes = b
	}
	if tot := pt.bytes + pt.hdrBytes; tot > pt.maxQ {
		pt.maxQ = tot
		pt.Counters.MaxQueueBytes = int(tot)
	}
	pt.kick()
}

// redMark draws RED's marking decision for a queue holding q bytes.
func (pt *Port) redMark(q int) bool {
	e := &pt.cfg.ECN
	switch {
	case q <= e.Kmin:
		return false
	case q > e.Kmax:
		return true
	default:
		prob := float64(q-e.Kmin) / float64(e.Kmax-e.Kmin) * e.Pmax
		return pt.rng.Float64() < prob
	}
}

// trim cuts p to the trim size, fixes the IPv6 and UDP length fields that
// survive, and rewrites DSCP (outer and inner) to TRIMMED, or
// TRIMMED_LASTHOP on a host-facing port.
func (pt *Port) trim(p *Packet) {
	size := pt.cfg.Trim.Size
	full := p.WireLen - FCSLen
	if full > size {
		full = size
	}
	if len(p.Data) > full {
		p.Data = p.Data[:full]
	}
	p.WireLen = wireLenOf(full)
	p.Flags = p.Flags&^FlagElided | FlagTrimmed
	d := uint8(DSCPTrimmed)
	if pt.HostFacing {
		d = DSCPTrimmedLastHop
	}
	p.SetDSCP(d)
	off := offIPv6
	for off+IPv6HeaderLen <= len(p.Data) {
		binary.BigEndian.PutUint16(p.Data[off+4:], uint16(full-off-IPv6HeaderLen))
		nh := p.Data[off+6]
		if off != offIPv6 {
			tc := (p.Data[off]<<4 | p.Data[off+1]>>4)
			tc = d<<2 | tc&3
			p.Data[off] = 6<<4 | tc>>4
			p.Data[off+1] = p.Data[off+1]&0x0f | tc<<4
		}
		off += IPv6HeaderLen
		if nh == ProtoIPv6 {
			continue
		}
		if nh == ProtoUDP && off+UDPHeaderLen <= len(p.Data) {
			binary.BigEndian.PutUint16(p.Data[off+4:], uint16(full-off))
			binary.BigEndian.PutUint16(p.Data[off+6:], 0) // checksum no longer covers the data
		}
		break
	}
}

func (pt *Port) startNext() {
	now := pt.loop.Now()
	p := pt.ctrlPop()
	if p == nil {
		if pt.qmask == 0 {
			return
		}
		pq := pt.pq
		var wake sim.Time
		for m := pt.qmask; m != 0; {
			c := bits.Len8(m) - 1 // highest class first
			m &^= 1 << c
			// The paused bit first: pausedUntil is a line of its own that
			// an unpaused port should never load.
			if pt.paused&(1<<c) != 0 && now < pq.pausedUntil[c] {
				if u := pq.pausedUntil[c]; wake == 0 || u < wake {
					wake = u
				}
				continue
			}
			p = pt.qpop(c)
			qc := &pq.qc[c]
			qc.TxPackets++
			qc.TxBytes += uint64(p.WireLen)
			if pt.feat&featAcct != 0 {
				pt.acct.release(p)
			}
			if pt.feat&featHDC != 0 && now-p.EnqAt > pt.obs.hdcMin {
				pt.obs.hdc.check(pt, p, c, now)
			}
			break
		}
		if p == nil {
			if wake != 0 && (pt.wakeAt <= now || wake < pt.wakeAt) {
				pt.wakeAt = wake
				pt.loop.Post(wake, pt, evPauseExpired)
			}
			return
		}
	}
	if now > pt.busyUntil {
		// The sub-nanosecond remainder only keeps back-to-back frames at
		// exact line rate; a frame after an idle gap starts afresh.
		pt.rem = 0
	}
	if pt.feat&featTap != 0 {
		pt.tap.TapFrame(int64(now), pcap.DirOutbound, p.Data, p.WireLen-FCSLen)
	}
	done := now + serializationTime(p.WireLen+pt.cfg.IFGBytes, pt.Tx.Rate, &pt.rem)
	pt.busyUntil = done
	pt.Counters.TxPackets++
	pt.Counters.TxBytes += uint64(p.WireLen)
	// The frame is committed to the wire: the link takes it now and
	// delivers it a propagation delay after its last bit (done).
	pt.Tx.transmit(p, done)
	if pt.Notify != nil || pt.qmask != 0 || pt.feat&featCtrl != 0 {
		pt.txPending = true
		pt.loop.Post(done, pt, evTxDone)
	}
}

// OnEvent handles the port's own events.
func (pt *Port) OnEvent(arg uint64) {
	switch arg & 0xff {
	case evTxDone:
		pt.txPending = false
		pt.startNext()
		if pt.Notify != nil {
			pt.Notify.TxReady(pt)
		}
	case evPauseExpired:
		if pt.loop.Now() >= pt.wakeAt {
			pt.kick()
		}
	case evWatchdog:
		pt.watchdogCheck(uint8(arg>>8), arg>>16&1 == 1)
	}
}

// receive takes a frame from the peer's link.
func (pt *Port) receive(p *Packet) {
	pt.Counters.RxPackets++
	pt.Counters.RxBytes += uint64(p.WireLen)
	if pt.feat&featTap != 0 {
		pt.tap.TapFrame(int64(pt.loop.Now()), pcap.DirInbound, p.Data, p.WireLen-FCSLen)
	}
	if len(p.Data) >= EthHeaderLen && p.EtherType() == EtherTypeMACC {
		pt.handleMACControl(p)
		p.Release()
		return
	}
	if !p.IsIPv6() {
		pt.drop(p, DropMalformed)
		return
	}
	if _, fwd := pt.Owner.(*Switch); !fwd {
		pt.Counters.Delivered++ // it leaves the fabric
	}
	pt.Owner.Ingress(p, pt)
}
