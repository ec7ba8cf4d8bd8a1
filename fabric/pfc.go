package fabric

import (
	"encoding/binary"
	"fmt"

	"github.com/vcluster/vcluster/sim"
)

// PFC PAUSE frames (IEEE 802.1Qbb): MAC control EtherType 0x8808, opcode
// 0x0101, a class-enable vector and eight 16-bit pause times in quanta of
// 512 bit times.
const (
	macControlPFC = 0x0101
	// MaxQuanta is the longest pause one frame can ask for.
	MaxQuanta   = 0xffff
	pfcFrameLen = MinFrameLen
)

var pfcDstMAC = [6]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01}

// SendPause queues a PFC frame asking the peer to pause class c for quanta
// (0 = resume). MAC control frames go out ahead of every queued frame.
func (pt *Port) SendPause(c uint8, quanta uint16) {
	p := pt.pool.Get(pfcFrameLen)
	clear(p.Data)
	copy(p.Data[0:6], pfcDstMAC[:])
	copy(p.Data[6:12], pt.MAC[:])
	binary.BigEndian.PutUint16(p.Data[12:], EtherTypeMACC)
	binary.BigEndian.PutUint16(p.Data[14:], macControlPFC)
	binary.BigEndian.PutUint16(p.Data[16:], 1<<c)
	binary.BigEndian.PutUint16(p.Data[18+2*int(c):], quanta)
	p.Class = ClassControl
	pt.Counters.Sent++ // a MAC control frame enters the fabric here
	if quanta == 0 {
		pt.Counters.ResumeTx++
	} else {
		pt.Counters.PauseTx++
	}
	pt.ctrlPush(p)
	pt.kick()
}

func (pt *Port) handleMACControl(p *Packet) {
	if len(p.Data) < 34 || binary.BigEndian.Uint16(p.Data[14:]) != macControlPFC {
		pt.Counters.Drops[DropMalformed]++
		return
	}
	pt.Counters.Delivered++ // taken by this port: it leaves the fabric
	en := binary.BigEndian.Uint16(p.Data[16:])
	for c := uint8(0); c < NumClasses; c++ {
		if en&(1<<c) != 0 {
			pt.pause(c, binary.BigEndian.Uint16(p.Data[18+2*int(c):]))
		}
	}
}

// pause applies a received pause (or resume) to class c of this egress port.
func (pt *Port) pause(c uint8, quanta uint16) {
	now := pt.loop.Now()
	if quanta == 0 {
		pt.Counters.ResumeRx++
		pt.q().pausedUntil[c] = 0
		pt.paused &^= 1 << c
		pt.kick()
		return
	}
	pt.Counters.PauseRx++
	cfg := pt.cfg.PFC
	if cfg != nil && cfg.WatchdogOn {
		pt.watchdogSawPause(c)
		if pt.wd.stormed&(1<<c) != 0 && pt.wd.action != WatchdogAlert {
			return // storm mitigation: pauses are ignored until restoration
		}
	}
	// quanta × 512 bit times at this port's rate.
	var rem uint64
	pt.q().pausedUntil[c] = now + serializationTime(int(quanta)*64, pt.Tx.Rate, &rem)
	pt.paused |= 1 << c
}

// IngressAccounting is a switch's PFC state: bytes held in the switch per
// (ingress port, lossless class), and which upstream ports it has paused.
//
// Static mode pauses an ingress at Xoff bytes and resumes it at Xon. The
// dynamic mode is HPCC's switch MMU (switch-mmu.cc): each (port, class)
// first fills a private reserve, then the switch-wide shared buffer, then
// (once the pause threshold is passed) the port's headroom. The threshold
// is what the shared buffer has free, shifted right by the port's shift:
//
//	threshold = (buffer − Σheadroom − Σreserve − shared used) >> shift
//
// so it falls as the switch fills. XOFF when the class holds headroom
// bytes or its shared bytes reach the threshold; XON when it holds no
// headroom bytes and its shared bytes are 0 or ResumeOffset below the
// threshold; a frame drops only when it fits neither the headroom nor
// the shared buffer.
type IngressAccounting struct {
	cfg   *PFCConfig
	ports []*Port
	bytes [][NumClasses]int // static: all held; dynamic: reserve + shared part
	xoff  []uint8           // bit c: XOFF sent for class c on this ingress
	loop  *sim.Loop

	// Dynamic mode.
	hdrm       [][NumClasses]int // headroom bytes per (port, class)
	sharedUsed int
	free       int // buffer − Σheadroom − Σreserve
}

// NewIngressAccounting returns PFC accounting for a switch's ports.
func NewIngressAccounting(loop *sim.Loop, cfg *PFCConfig, ports []*Port) *IngressAccounting {
	a := &IngressAccounting{cfg: cfg, ports: ports, bytes: make([][NumClasses]int, len(ports)), xoff: make([]uint8, len(ports)), loop: loop}
	if cfg.Dynamic {
		a.hdrm = make([][NumClasses]int, len(ports))
		buf := cfg.SharedBuffer
		if buf == 0 {
			for _, p := range ports {
				buf += p.cfg.BufferBytes
			}
		}
		// HPCC's ConfigNPort: one headroom and one reserve per port.
		a.free = buf - len(ports)*(cfg.Headroom+cfg.Reserve)
	}
	return a
}

// SharedFree is, in dynamic mode, the switch's shared buffer left after
// every port's headroom and reserve (what the threshold is a shift of); 0
// otherwise.
func (a *IngressAccounting) SharedFree() int { return a.free }

// admit accounts p arriving on port in; it reports false when p must drop
// because the headroom is exhausted.
func (a *IngressAccounting) admit(p *Packet, in int32) bool {
	if a.cfg.Dynamic {
		return a.admitDynamic(p, in)
	}
	c := p.Class
	b := a.bytes[in][c] + p.WireLen
	if b > a.cfg.Xoff+a.cfg.Headroom {
		return false
	}
	a.bytes[in][c] = b
	if b >= a.cfg.Xoff && a.xoff[in]&(1<<c) == 0 {
		a.sendXoff(in, c)
	}
	return true
}

func (a *IngressAccounting) sendXoff(in int32, c uint8) {
	a.xoff[in] |= 1 << c
	a.ports[in].SendPause(c, MaxQuanta)
	a.armRefresh(in, c)
}

// admitDynamic is HPCC's CheckIngressAdmission, UpdateIngressAdmission
// and CheckShouldPause.
func (a *IngressAccounting) admitDynamic(p *Packet, in int32) bool {
	c, n := p.Class, p.WireLen
	th := a.Threshold(int(in))
	if n+a.hdrm[in][c] > a.cfg.Headroom && n+a.shared(in, c) > th {
		return false
	}
	b := a.bytes[in][c] + n
	switch {
	case b <= a.cfg.Reserve:
		a.bytes[in][c] = b
	case b-a.cfg.Reserve > th:
		a.hdrm[in][c] += n
	default:
		a.bytes[in][c] = b
		a.sharedUsed += min(n, b-a.cfg.Reserve)
	}
	if a.xoff[in]&(1<<c) == 0 && (a.hdrm[in][c] > 0 || a.shared(in, c) >= a.Threshold(int(in))) {
		a.sendXoff(in, c)
	}
	return true
}

// release un-accounts p when it leaves the switch (or is dropped).
func (a *IngressAccounting) release(p *Packet) {
	if !a.cfg.lossless(p.Class) || p.InPort < 0 {
		return
	}
	in, c := p.InPort, p.Class
	p.InPort = -1
	if a.cfg.Dynamic {
		a.releaseDynamic(in, c, p.WireLen)
		return
	}
	a.bytes[in][c] -= p.WireLen
	if a.xoff[in]&(1<<c) != 0 && a.bytes[in][c] <= a.cfg.Xon {
		a.xoff[in] &^= 1 << c
		a.ports[in].SendPause(c, 0)
	}
}

// releaseDynamic is HPCC's RemoveFromIngressAdmission and
// CheckShouldResume.
func (a *IngressAccounting) releaseDynamic(in int32, c uint8, n int) {
	fromHdrm := min(a.hdrm[in][c], n)
	fromShared := min(n-fromHdrm, max(0, a.bytes[in][c]-a.cfg.Reserve))
	a.hdrm[in][c] -= fromHdrm
	a.bytes[in][c] -= n - fromHdrm
	a.sharedUsed -= fromShared
	if a.xoff[in]&(1<<c) != 0 && a.hdrm[in][c] == 0 {
		if s := a.shared(in, c); s == 0 || s+a.cfg.ResumeOffset <= a.Threshold(int(in)) {
			a.xoff[in] &^= 1 << c
			a.ports[in].SendPause(c, 0)
		}
	}
}

// shared is the bytes (port, class) holds in the shared buffer.
func (a *IngressAccounting) shared(in int32, c uint8) int {
	return max(0, a.bytes[in][c]-a.cfg.Reserve)
}

// Threshold is the dynamic mode's pause threshold of ingress port in now:
// the free shared buffer >> the port's shift (3 at the NIC rate, one less
// per doubling of the port's rate above it, as HPCC's third.cc sets it).
func (a *IngressAccounting) Threshold(in int) int {
	shift := 3
	if pt := a.ports[in]; pt.Tx != nil {
		for r := pt.Tx.Rate; r > a.cfg.NICRate && a.cfg.NICRate > 0 && shift > 0; r /= 2 {
			shift--
		}
	}
	return max(0, a.free-a.sharedUsed) >> shift
}

// SharedUsed is the dynamic mode's bytes in the switch's shared buffer.
func (a *IngressAccounting) SharedUsed() int { return a.sharedUsed }

// Held returns the bytes accounted to (ingress port, class).
func (a *IngressAccounting) Held(in int, c int) int {
	if a.hdrm != nil {
		return a.bytes[in][c] + a.hdrm[in][c]
	}
	return a.bytes[in][c]
}

// A pause of MaxQuanta runs out; while XOFF holds, it is renewed at half its
// length so the upstream never resumes on its own.
func (a *IngressAccounting) armRefresh(in int32, c uint8) {
	pt := a.ports[in]
	var rem uint64
	half := serializationTime(MaxQuanta*64/2, pt.Tx.Rate, &rem)
	a.loop.Post(a.loop.Now()+half, a, uint64(in)<<8|uint64(c))
}

// OnEvent renews a pause that is still needed.
func (a *IngressAccounting) OnEvent(arg uint64) {
	in, c := int32(arg>>8), uint8(arg&0xff)
	if a.xoff[in]&(1<<c) != 0 {
		a.ports[in].SendPause(c, MaxQuanta)
		a.armRefresh(in, c)
	}
}

// WatchdogAction is what the PFC storm watchdog does to a stormed class.
type WatchdogAction int

// Watchdog actions.
const (
	// WatchdogDrop ignores the class's pauses and drops its frames, both
	// directions (SONiC's default).
	WatchdogDrop WatchdogAction = iota
	// WatchdogForward ignores the class's pauses and keeps forwarding.
	WatchdogForward
	// WatchdogAlert only counts the storm.
	WatchdogAlert
)

// The watchdog actions' config words (fabric.queue.pfc.watchdog.action).
const (
	WatchdogDropName    = "drop"
	WatchdogForwardName = "forward"
	WatchdogAlertName   = "alert"
)

var watchdogActionNames = [...]string{WatchdogDrop: WatchdogDropName, WatchdogForward: WatchdogForwardName, WatchdogAlert: WatchdogAlertName}

func (a WatchdogAction) String() string {
	if a >= 0 && int(a) < len(watchdogActionNames) {
		return watchdogActionNames[a]
	}
	return fmt.Sprintf("WatchdogAction(%d)", int(a))
}

// ParseWatchdogAction maps a config word to an action.
func ParseWatchdogAction(s string) (WatchdogAction, bool) {
	for a, n := range watchdogActionNames {
		if n == s {
			return WatchdogAction(a), true
		}
	}
	return 0, false
}

// watchdog is the PFC storm watchdog of one egress port (SONiC's pfcwd):
// a class that stays paused with frames queued and no transmit progress for
// the detection time is declared stormed; then its pauses are ignored (and,
// in drop mode, its frames dropped) until no pause has arrived for the
// restoration time. In drop mode the frames of a stormed class that
// arrive on the port are dropped as well (SONiC drops both directions).
type watchdog struct {
	action    WatchdogAction
	armed     uint8 // bit c: a detection check is scheduled
	stormed   uint8
	lastPause [NumClasses]sim.Time
	txSnap    [NumClasses]uint64
}

// dropsIngress reports whether frames of class c arriving on the port are
// dropped: the class is stormed and the action is drop.
func (w *watchdog) dropsIngress(c uint8) bool {
	return w.action == WatchdogDrop && w.stormed&(1<<c) != 0
}

func (pt *Port) watchdogSawPause(c uint8) {
	if pt.wd == nil {
		pt.wd = &watchdog{action: pt.cfg.PFC.WatchdogAct}
		pt.feat |= featWd
	}
	w := pt.wd
	w.lastPause[c] = pt.loop.Now()
	if w.armed&(1<<c) == 0 && w.stormed&(1<<c) == 0 {
		w.armed |= 1 << c
		w.txSnap[c] = pt.QCounters[c].TxPackets
		pt.loop.Post(pt.loop.Now()+sim.Time(pt.cfg.PFC.Detection), pt, uint64(c)<<8|evWatchdog)
	}
}

func (pt *Port) watchdogCheck(c uint8, restore bool) {
	w := pt.wd
	now := pt.loop.Now()
	cfg := pt.cfg.PFC
	if restore {
		if now-w.lastPause[c] >= sim.Time(cfg.Restoration) {
			w.stormed &^= 1 << c
			pt.Counters.StormsRestored++
			return
		}
		pt.loop.Post(w.lastPause[c]+sim.Time(cfg.Restoration), pt, 1<<16|uint64(c)<<8|evWatchdog)
		return
	}
	w.armed &^= 1 << c
	pq := pt.q()
	stuck := now < pq.pausedUntil[c] && pt.queues[c].n > 0 && pq.qc[c].TxPackets == w.txSnap[c]
	if !stuck {
		if now < pq.pausedUntil[c] { // still paused but moving: keep watching
			w.armed |= 1 << c
			w.txSnap[c] = pq.qc[c].TxPackets
			pt.loop.Post(now+sim.Time(cfg.Detection), pt, uint64(c)<<8|evWatchdog)
		}
		return
	}
	w.stormed |= 1 << c
	pt.Counters.StormsDetected++
	if w.action == WatchdogAlert {
		return
	}
	pq.pausedUntil[c] = 0
	pt.paused &^= 1 << c
	if w.action == WatchdogDrop {
		for pt.queues[c].n > 0 {
			p := pt.qpop(int(c))
			if pt.acct != nil {
				pt.acct.release(p)
			}
			pq.qc[c].Drops++
			pt.drop(p, DropWatchdog)
		}
	}
	pt.loop.Post(now+sim.Time(cfg.Restoration), pt, 1<<16|uint64(c)<<8|evWatchdog)
	pt.kick()
}
