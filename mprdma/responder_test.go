package mprdma

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// The responder is driven here as the QP drives it: data packets are real
// bytes (roce.Encode with a RETH on every WRITE, OrderRE bits set in the
// bytes), decoded by roce.Decode as the QP decodes them, and every control
// packet it writes is decoded back and checked as bytes.

const (
	respPMTU     = 256
	respSlots    = 1 << 12 // packets the test region holds (VA wraps over it)
	respPeerHost = 7
	respPeerQPN  = 0x000321
	respLocalQPN = 0x000123
)

// respHarness is one responder with a registered region.
type respHarness struct {
	t     testing.TB
	r     responder
	cfg   Config
	stats Stats
	mem   verbs.Memory
	mr    *verbs.MR
	buf   []byte // data packets are encoded here
	ctl   []byte // control packets are written here
	pkt   roce.Packet
	rx    verbs.Rx
}

// respConfig is the derived config the tests start from: one BDP of 16
// packets, a 64-entry bitmap.
func respConfig(s Scheme) Config {
	c := DefaultConfig()
	c.Scheme, c.PMTU, c.Paths, c.BDPPackets = s, respPMTU, 4, 16
	return c
}

func newRespHarness(t testing.TB, cfg Config, initialPSN uint32) *respHarness {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := &respHarness{t: t, cfg: cfg.Derived(), buf: make([]byte, verbs.MaxTxBytes), ctl: make([]byte, verbs.MaxTxBytes)}
	h.mr = h.mem.Register(make([]byte, respSlots*respPMTU))
	h.r.init(&h.cfg, &h.mem, &h.stats)
	h.r.connect(verbs.QPAttrs{QPN: respLocalQPN}, verbs.QPAttrs{Host: respPeerHost, QPN: respPeerQPN, InitialPSN: initialPSN})
	return h
}

// respData describes one data packet.
type respData struct {
	psn     uint32
	op      uint8  // 0: WRITE Only
	flags   uint8  // OrderRE data flags (FReTx, create, delete)
	copies  int    // FReTx copy count
	path    uint16 // Rx.DstPath
	ev      uint32
	ce      bool
	va      uint64 // 0: the packet's own slot in the region
	key     uint32 // 0: the region's
	dmaLen  uint32 // 0: PMTU
	imm     uint32
	payload []byte // nil: PMTU bytes of psn's pattern
}

// respPattern is the payload the tests send for a PSN.
func respPattern(psn uint32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(psn*7 + uint32(i)*13)
	}
	return b
}

// vaOf is the VA of a PSN's packet in the test region.
func (h *respHarness) vaOf(psn uint32) uint64 {
	return h.mr.VA + uint64(psn%respSlots)*respPMTU
}

// encode writes d's packet into h.buf and returns its stored and wire
// lengths.
func (h *respHarness) encode(d respData) (int, int) {
	h.t.Helper()
	op := d.op
	if op == 0 {
		op = roce.OpWriteOnly
	}
	pl := d.payload
	if pl == nil {
		pl = respPattern(d.psn, respPMTU)
	}
	va, key, dl := d.va, d.key, d.dmaLen
	if va == 0 {
		va = h.vaOf(d.psn)
	}
	if key == 0 {
		key = h.mr.Key
	}
	if dl == 0 {
		dl = uint32(len(pl))
	}
	hdr := roce.Header{BTH: ib.BTH{Opcode: op, PKey: roce.DefaultPKey, DestQP: respLocalQPN, PSN: d.psn & ib.PSNMask}, RETH: roce.RETH{VA: va, RKey: key, DMALen: dl}, Imm: d.imm}
	s, w, err := roce.Encode(h.buf, &hdr, true, pl, len(pl))
	if err != nil {
		h.t.Fatal(err)
	}
	orderre.SetFlags(h.buf, d.flags)
	if d.flags&orderre.FlagFReTx != 0 {
		orderre.SetCopies(h.buf, d.copies)
	}
	return s, w
}

// recv feeds d at now, decoding it as the QP does.
func (h *respHarness) recv(now int64, d respData) {
	h.t.Helper()
	s, w := h.encode(d)
	h.rx = verbs.Rx{Data: h.buf[:s], WireLen: w, SrcHost: respPeerHost, EV: d.ev, CE: d.ce, DstPath: d.path}
	if err := h.pkt.Decode(h.rx.Data, w, true); err != nil {
		h.t.Fatal(err)
	}
	h.r.receive(now, &h.rx, &h.pkt)
	h.check()
}

func (h *respHarness) check() {
	h.t.Helper()
	if err := h.r.check(); err != nil {
		h.t.Fatal(err)
	}
}

// respCtl is a control packet as decoded from the responder's bytes.
type respCtl struct {
	tx       verbs.Tx
	syndrome uint8
	psn, msn uint32
	flags    uint8
	becn     bool
	destQP   uint32
}

func (c respCtl) kind() string {
	switch {
	case c.syndrome == ackSyndrome:
		return "ACK"
	case c.syndrome == orderre.SyndromeFNACK:
		return "FNACK"
	case c.syndrome == ib.SyndromeNAK|ib.NakPSNSeqError:
		return "NAK"
	}
	return fmt.Sprintf("NAK(%#x)", c.syndrome)
}

func (c respCtl) String() string {
	s := fmt.Sprintf("%s psn=%d msn=%d", c.kind(), c.psn, c.msn)
	if c.flags&orderre.FlagRegister != 0 {
		s += " register"
	}
	if c.flags&orderre.FlagUnregister != 0 {
		s += " unregister"
	}
	if c.becn {
		s += " becn"
	}
	if c.tx.SrcPath != 0 {
		s += fmt.Sprintf(" path=%d", c.tx.SrcPath)
	}
	return s
}

// drain takes every queued control packet, decoding its bytes (roce's
// decoder accepts the FNACK's syndrome: NAK class, an undefined code).
func (h *respHarness) drain(now int64) []respCtl {
	h.t.Helper()
	var out []respCtl
	for {
		tx, ok := h.r.nextControl(now, h.ctl)
		if !ok {
			return out
		}
		b := h.ctl[:tx.Len]
		var bth ib.BTH
		var aeth ib.AETH
		if bth.Parse(b) != nil || aeth.Parse(b[ib.BTHLen:]) != nil {
			h.t.Fatalf("control packet too short: %x", b)
		}
		if _, err := roce.Decode(b, tx.WireLen, true); err != nil {
			h.t.Fatalf("control packet %x: %v", b, err)
		}
		if tx.Len != tx.WireLen || tx.WireLen != ib.BTHLen+ib.AETHLen+ib.ICRCLen || bth.Opcode != roce.OpAck {
			h.t.Fatalf("control packet lengths %d/%d, opcode %#x", tx.Len, tx.WireLen, bth.Opcode)
		}
		if tx.DstHost != respPeerHost || bth.DestQP != respPeerQPN || tx.DSCP != verbs.DSCPControl || tx.ECT || bth.PKey != roce.DefaultPKey {
			h.t.Fatalf("control packet addressed %+v, dest QP %#x, pkey %#x", tx, bth.DestQP, bth.PKey)
		}
		out = append(out, respCtl{tx: tx, syndrome: aeth.Syndrome, psn: bth.PSN, msn: aeth.MSN, flags: orderre.Read(b).Flags, becn: bth.BECN, destQP: bth.DestQP})
	}
}

// drainString is drain as one line per packet.
func (h *respHarness) drainString(now int64) string {
	var b strings.Builder
	for _, c := range h.drain(now) {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// respKinds counts control packets by kind.
func respKinds(cs []respCtl) map[string]int {
	m := map[string]int{}
	for _, c := range cs {
		m[c.kind()]++
	}
	return m
}

func TestResponderInOrderAcksEveryPacket(t *testing.T) {
	h := newRespHarness(t, respConfig(SchemeMPRDMA), 1000)
	for i := uint32(0); i < 5; i++ {
		h.recv(int64(i)*100, respData{psn: 1000 + i, path: uint16(i%4) + 1, ev: 0xc000 + i, ce: i == 2})
		cs := h.drain(int64(i) * 100)
		if len(cs) != 1 {
			t.Fatalf("packet %d: %d control packets, want one ACK", i, len(cs))
		}
		c := cs[0]
		if c.syndrome != 0x1F || c.psn != 1000+i || c.msn != 1000+i || c.flags != 0 || c.becn != (i == 2) ||
			c.tx.SrcPath != uint16(i%4)+1 || c.tx.EV != 0xc000+i || c.tx.DstPath != 0 {
			t.Fatalf("packet %d: %+v", i, c)
		}
	}
	if off := h.vaOf(1003) - h.mr.VA; !bytes.Equal(h.mr.Buf[off:off+respPMTU], respPattern(1003, respPMTU)) {
		t.Fatal("payload not placed")
	}
	var qs verbs.QPStats
	h.r.fill(&qs)
	if qs.BytesPlaced != 5*respPMTU || qs.ECNMarksReceived != 1 || qs.ControlPacketsSent != 5 || qs.DuplicatesReceived != 0 {
		t.Fatalf("%+v", qs)
	}
	if h.stats.BitmapOccupancy != 0 || h.stats.BitmapPeak != 0 { // in order: nothing held
		t.Fatalf("occupancy %d peak %d", h.stats.BitmapOccupancy, h.stats.BitmapPeak)
	}
}

func TestResponderFirstAckBeforeAnythingInOrder(t *testing.T) {
	// Out of order from the start: the cumulative ack is InitialPSN − 1
	// (nothing), the MSN names the packet, across the PSN wrap.
	h := newRespHarness(t, respConfig(SchemeMPRDMA), 0)
	h.recv(0, respData{psn: 2})
	cs := h.drain(0)
	if len(cs) != 1 || cs[0].psn != ib.PSNMask || cs[0].msn != 2 {
		t.Fatalf("%v", cs)
	}
}

func TestResponderOutOfOrderPlacementAndWriteImm(t *testing.T) {
	// A 4-packet WRITE with Immediate arriving 3, 1, 0, 2: every packet is
	// placed by its own RETH, the completion comes when ePSN passes the
	// last packet, and the region holds the message byte for byte.
	h := newRespHarness(t, respConfig(SchemeOrderRE), 0xFFFFFE) // crosses the PSN wrap
	msg := respPattern(99, 4*respPMTU)
	base := h.mr.VA + 100*respPMTU
	ops := []uint8{roce.OpWriteFirst, roce.OpWriteMiddle, roce.OpWriteMiddle, roce.OpWriteLastImm}
	for k, i := range []uint32{3, 1, 0, 2} {
		psn := (0xFFFFFE + i) & ib.PSNMask
		h.recv(int64(k), respData{psn: psn, op: ops[i], va: base + uint64(i)*respPMTU, dmaLen: uint32(len(msg)), imm: 0xabcd,
			payload: msg[i*respPMTU : (i+1)*respPMTU]})
		if got := h.r.pollCompletions(nil); (k < 3) != (len(got) == 0) {
			t.Fatalf("after packet %d: completions %v", i, got)
		} else if k == 3 && (len(got) != 1 || got[0] != (verbs.Completion{QPN: respLocalQPN, Op: verbs.OpRecvImm, Status: verbs.StatusOK, Bytes: uint64(len(msg)), Imm: 0xabcd})) {
			t.Fatalf("completion %+v", got)
		}
	}
	if !bytes.Equal(h.mr.Buf[100*respPMTU:104*respPMTU], msg) {
		t.Fatal("message not placed byte for byte")
	}
	cs := h.drain(4)
	want := []uint32{0xFFFFFD, 0xFFFFFD, 0xFFFFFF, 0x000001} // cumulative: nothing, nothing, 0..1, all
	if len(cs) != 4 {
		t.Fatalf("%v", cs)
	}
	for k, c := range cs {
		if c.kind() != "ACK" || c.psn != want[k] {
			t.Fatalf("ACK %d: %v, want cumulative %#x", k, c, want[k])
		}
	}
	if h.stats.BitmapPeak != 4 || h.stats.BitmapOccupancy != 0 {
		t.Fatalf("peak %d occupancy %d", h.stats.BitmapPeak, h.stats.BitmapOccupancy)
	}
}

func TestResponderDuplicates(t *testing.T) {
	h := newRespHarness(t, respConfig(SchemeRandom), 0)
	h.recv(0, respData{psn: 0})
	h.recv(1, respData{psn: 3})
	h.drain(1)
	h.recv(2, respData{psn: 0, path: 2}) // before ePSN
	h.recv(3, respData{psn: 3, path: 3}) // in the bitmap, already there
	cs := h.drain(3)
	if len(cs) != 2 || cs[0].kind() != "ACK" || cs[0].msn != 0 || cs[0].psn != 0 || cs[0].tx.SrcPath != 2 || cs[1].msn != 3 || cs[1].flags != 0 {
		t.Fatalf("%v", cs)
	}
	var qs verbs.QPStats
	h.r.fill(&qs)
	if qs.DuplicatesReceived != 2 || qs.BytesPlaced != 2*respPMTU {
		t.Fatalf("%+v", qs)
	}
}

func TestResponderBitmapOverflowOneNAK(t *testing.T) {
	cfg := respConfig(SchemeMPRDMA)
	cfg.BitmapEntries, cfg.LossThreshold = 16, 100 // no loss detection here
	h := newRespHarness(t, cfg, 0)
	h.recv(0, respData{psn: 1})
	h.drain(0)
	for psn := uint32(16); psn < 66; psn++ { // 50 packets beyond [0, 16)
		h.recv(10, respData{psn: psn})
	}
	cs := h.drain(10)
	if len(cs) != 1 || cs[0].kind() != "NAK" || cs[0].psn != 0 || cs[0].msn != 16 {
		t.Fatalf("a burst beyond the bitmap: %v, want one NAK for ePSN 0", cs)
	}
	if h.stats.BitmapOverflows != 50 || h.stats.NAKsSent != 1 {
		t.Fatalf("overflows %d NAKs %d", h.stats.BitmapOverflows, h.stats.NAKsSent)
	}
	// An RTO later the same ePSN is NAKed again.
	h.recv(10+cfg.RTO-1, respData{psn: 20})
	if cs := h.drain(0); len(cs) != 0 {
		t.Fatalf("within the RTO: %v", cs)
	}
	h.recv(10+cfg.RTO, respData{psn: 20})
	if cs := h.drain(0); len(cs) != 1 || cs[0].kind() != "NAK" || cs[0].psn != 0 {
		t.Fatalf("after the RTO: %v", cs)
	}
	// Once ePSN moves, a new ePSN is NAKed at once.
	h.recv(20+cfg.RTO, respData{psn: 0})
	h.recv(20+cfg.RTO, respData{psn: 18})
	cs = h.drain(0)
	if k := respKinds(cs); k["NAK"] != 1 || cs[len(cs)-1].psn != 2 {
		t.Fatalf("after ePSN moved to 2: %v", cs)
	}
	if h.stats.BitmapOccupancy != 0 || h.stats.BitmapPeak != 2 {
		t.Fatalf("overflowing packets are not in the bitmap: occupancy %d peak %d", h.stats.BitmapOccupancy, h.stats.BitmapPeak)
	}
}

func TestResponderBadKeyFails(t *testing.T) {
	h := newRespHarness(t, respConfig(SchemeOrderRE), 0)
	h.recv(0, respData{psn: 0})
	h.recv(1, respData{psn: 2, key: 99})
	if !errors.Is(h.r.err(), ErrRemoteAccess) {
		t.Fatalf("err %v", h.r.err())
	}
	cs := h.drain(1)
	if len(cs) != 2 || cs[1].syndrome != 0x62 || cs[1].psn != 2 || cs[1].msn != 0 {
		t.Fatalf("%v", cs)
	}
	h.recv(2, respData{psn: 1})
	if cs := h.drain(2); len(cs) != 0 {
		t.Fatalf("a failed responder answered %v", cs)
	}
	if _, ok := h.r.deadline(); ok {
		t.Fatal("a failed responder keeps a timer")
	}
	// Out of the region's range, and a bad length, likewise.
	h = newRespHarness(t, respConfig(SchemeOrderRE), 0)
	h.recv(0, respData{psn: 0, va: h.mr.VA + uint64(len(h.mr.Buf)) - 10})
	if !errors.Is(h.r.err(), ErrRemoteAccess) {
		t.Fatalf("out of range: err %v", h.r.err())
	}
	h = newRespHarness(t, respConfig(SchemeOrderRE), 0)
	h.recv(0, respData{psn: 0, op: roce.OpWriteFirst, payload: make([]byte, 100), dmaLen: 1000})
	if cs := h.drain(0); !errors.Is(h.r.err(), ErrInvalidRequest) || len(cs) != 1 || cs[0].syndrome != 0x61 {
		t.Fatalf("short First: err %v, %v", h.r.err(), cs)
	}
}

// lossRun delivers 0..n−1 without lost, each packet after the one before.
func lossRun(h *respHarness, n uint32, lost uint32) {
	for psn := uint32(0); psn < n; psn++ {
		if psn != lost {
			h.recv(int64(psn)*10, respData{psn: psn, path: uint16(psn%4) + 1})
		}
	}
}

func TestResponderLossBySchemes(t *testing.T) {
	for _, tc := range []struct {
		s    Scheme
		want string // the loss request
	}{
		{SchemeMPRDMA, "NAK psn=5 msn=5"},
		{SchemeRandom, "FNACK psn=5 msn=4"},
		{SchemeOrderRE, "FNACK psn=5 msn=4"},
	} {
		t.Run(tc.s.String(), func(t *testing.T) {
			cfg := respConfig(tc.s)
			// The threshold is 4: LossThreshold, or L_max = ob_max (OMax, 1,
			// before any reordering is seen) + Delta (3).
			cfg.LossThreshold, cfg.Delta, cfg.OMax = 4, 3, 1
			h := newRespHarness(t, cfg, 0)
			lossRun(h, 5, 99)
			h.drain(0)
			// 5 is lost; 6..9 keep it within the threshold (rcv_oo_h − 4 = 5 at 9).
			for psn := uint32(6); psn <= 9; psn++ {
				h.recv(int64(psn)*10, respData{psn: psn})
			}
			if k := respKinds(h.drain(0)); k["ACK"] != 4 || len(k) != 1 {
				t.Fatalf("within the threshold: %v", k)
			}
			h.recv(100, respData{psn: 10, path: 3})
			cs := h.drain(0)
			if len(cs) != 2 || cs[1].String() != tc.want+" path=3" {
				t.Fatalf("%v, want ACK then %q", cs, tc.want)
			}
			if h.stats.LossesDetected != 1 {
				t.Fatalf("losses %d", h.stats.LossesDetected)
			}
			// Judged once: more arrivals do not ask again.
			for psn := uint32(11); psn < 20; psn++ {
				h.recv(int64(psn)*10, respData{psn: psn})
			}
			if k := respKinds(h.drain(0)); len(k) != 1 || h.stats.LossesDetected != 1 {
				t.Fatalf("asked again: %v", k)
			}
			dl, ok := h.r.deadline()
			if !ok || dl != 100+h.cfg.RepairTimeout {
				t.Fatalf("repair clock %d %v, want %d", dl, ok, 100+h.cfg.RepairTimeout)
			}
			// The repair comes (a retransmission, 2 RTTs later).
			h.recv(1000, respData{psn: 5, flags: orderre.FlagFReTx, copies: 2})
			cs = h.drain(0)
			if len(cs) != 1 || cs[0].psn != 19 || cs[0].flags != 0 {
				t.Fatalf("the repair's ACK: %v (an FReTx gets no fast/slow signal)", cs)
			}
			rs := h.r.pollRepairs(nil)
			if len(rs) != 1 || rs[0] != (Repair{PSN: 5, DetectedAt: 100, RepairedAt: 1000, Requests: 1}) || h.stats.Repaired != 1 {
				t.Fatalf("repairs %+v", rs)
			}
			if _, ok := h.r.deadline(); ok {
				t.Fatal("a repaired hole keeps its clock")
			}
		})
	}
}

func TestResponderRepairTimeout(t *testing.T) {
	for _, s := range []Scheme{SchemeMPRDMA, SchemeRandom, SchemeOrderRE} {
		t.Run(s.String(), func(t *testing.T) {
			cfg := respConfig(s)
			cfg.LossThreshold, cfg.Delta, cfg.OMax, cfg.RepairTimeout = 2, 2, 1, 5000
			h := newRespHarness(t, cfg, 0)
			// Holes 3 and 4, then enough arrivals to judge both lost at 200
			// (threshold 2, or L_max = 1 + 2).
			lossRun(h, 3, 99)
			for psn := uint32(5); psn <= 8; psn++ {
				h.recv(200, respData{psn: psn})
			}
			h.drain(0)
			if h.stats.LossesDetected != 2 {
				t.Fatalf("losses %d", h.stats.LossesDetected)
			}
			dl, ok := h.r.deadline()
			if !ok || dl != 200+5000 {
				t.Fatalf("deadline %d %v", dl, ok)
			}
			h.tick(dl - 1)
			if cs := h.drain(0); len(cs) != 0 || h.stats.RetxFailures != 0 {
				t.Fatalf("early: %v", cs)
			}
			h.recv(dl-1, respData{psn: 4, flags: orderre.FlagFReTx}) // 4 repaired in time
			h.drain(0)
			h.tick(dl)
			cs := h.drain(0)
			if h.stats.RetxFailures != 1 {
				t.Fatalf("failures %d, want 1 (hole 3)", h.stats.RetxFailures)
			}
			if s == SchemeOrderRE {
				if len(cs) != 1 || cs[0].String() != "NAK psn=3 msn=3" {
					t.Fatalf("fallback %v, want a NAK for ePSN 3", cs)
				}
			} else if len(cs) != 0 {
				t.Fatalf("%v: the clock only measures, sent %v", s, cs)
			}
			if _, ok := h.r.deadline(); ok {
				t.Fatal("an expired clock re-armed")
			}
			h.recv(dl+10, respData{psn: 3})
			rs := h.r.pollRepairs(nil)
			reqs := 1
			if s == SchemeOrderRE {
				reqs = 2
			}
			if len(rs) != 2 || rs[1].PSN != 3 || rs[1].Requests != reqs || rs[0].PSN != 4 || rs[0].RepairedAt != dl-1 {
				t.Fatalf("repairs %+v", rs)
			}
		})
	}
}

func (h *respHarness) tick(now int64) {
	h.t.Helper()
	h.r.tick(now)
	h.check()
}

func TestResponderSpuriousLoss(t *testing.T) {
	cfg := respConfig(SchemeRandom)
	cfg.LossThreshold, cfg.BaseRTT = 2, 1000
	h := newRespHarness(t, cfg, 0)
	lossRun(h, 8, 3) // 3 judged lost at 60 (rcv_oo_h 6)
	if h.stats.LossesDetected != 1 {
		t.Fatalf("losses %d", h.stats.LossesDetected)
	}
	h.recv(500, respData{psn: 3}) // the original, too soon for a repair
	h.recv(600, respData{psn: 9})
	h.recv(700, respData{psn: 8})
	h.recv(2000, respData{psn: 10})
	h.recv(2100, respData{psn: 13})
	h.recv(2200, respData{psn: 14})
	h.recv(2300, respData{psn: 15}) // 11, 12 lost at 2200, 2300
	h.recv(3400, respData{psn: 11}) // a repair: BaseRTT after
	rs := h.r.pollRepairs(nil)
	if h.stats.SpuriousLosses != 1 || len(rs) != 2 || !rs[0].Spurious || rs[0].PSN != 3 || rs[1].Spurious || rs[1].PSN != 11 {
		t.Fatalf("spurious %d, repairs %+v", h.stats.SpuriousLosses, rs)
	}
}

func TestResponderRepairRingBounded(t *testing.T) {
	cfg := respConfig(SchemeRandom)
	cfg.LossThreshold = 1
	h := newRespHarness(t, cfg, 0)
	// Every other packet lost, then repaired: maxRepairRecords + 10 repairs.
	now := int64(0)
	next := uint32(0)
	for h.stats.Repaired < maxRepairRecords+10 {
		h.recv(now, respData{psn: next + 1})
		h.recv(now, respData{psn: next + 2})
		h.recv(now, respData{psn: next + 3})
		h.recv(now+1, respData{psn: next, flags: orderre.FlagFReTx})
		h.drain(now)
		next += 4
		now += 10
	}
	rs := h.r.pollRepairs(nil)
	if len(rs) != maxRepairRecords || h.stats.RepairsDropped != 10 || rs[0].PSN != 40 {
		t.Fatalf("%d records, %d dropped, first %+v", len(rs), h.stats.RepairsDropped, rs[0])
	}
}

func TestResponderOccupancyIntegral(t *testing.T) {
	h := newRespHarness(t, respConfig(SchemeOrderRE), 0)
	h.recv(100, respData{psn: 0})
	h.recv(200, respData{psn: 3}) // occupancy 3 from 200
	h.recv(500, respData{psn: 1}) // 2 from 500
	h.tick(1000)                  // 3·300 + 2·500
	if h.stats.OccupancyNs != 3*300+2*500 || h.stats.BitmapOccupancy != 2 || h.stats.BitmapPeak != 3 {
		t.Fatalf("integral %v occupancy %d peak %d", h.stats.OccupancyNs, h.stats.BitmapOccupancy, h.stats.BitmapPeak)
	}
}

func TestResponderFastSlowSignals(t *testing.T) {
	cfg := respConfig(SchemeOrderRE)
	cfg.LFast = 2
	h := newRespHarness(t, cfg, 0)
	for _, psn := range []uint32{0, 4, 3, 2, 1} { // lags 0, 0, 1, 2, 3
		h.recv(0, respData{psn: psn, path: uint16(psn) + 1})
	}
	cs := h.drain(0)
	want := []string{"register", "register", "register", "register", "unregister"}
	for i, c := range cs {
		if !strings.Contains(c.String(), " "+want[i]) || c.tx.SrcPath != uint16(c.msn)+1 {
			t.Fatalf("ACK %d: %v, want %s", i, c, want[i])
		}
	}
	if h.stats.FastArrivals != 4 || h.stats.SlowArrivals != 1 {
		t.Fatalf("fast %d slow %d", h.stats.FastArrivals, h.stats.SlowArrivals)
	}
	// MP-RDMA counts the same split but signals nothing.
	h = newRespHarness(t, func() Config { c := respConfig(SchemeMPRDMA); c.LFast = 2; return c }(), 0)
	for _, psn := range []uint32{0, 4, 3, 2, 1} {
		h.recv(0, respData{psn: psn})
	}
	for _, c := range h.drain(0) {
		if c.flags != 0 {
			t.Fatalf("MP-RDMA signalled: %v", c)
		}
	}
	if h.stats.FastArrivals != 4 || h.stats.SlowArrivals != 1 {
		t.Fatalf("fast %d slow %d", h.stats.FastArrivals, h.stats.SlowArrivals)
	}
}

// respStreamLen is the PSNs one round of respStream covers.
const respStreamLen = 1024

// respStream pre-encodes a reordered stream of respStreamLen PSNs with a
// loss every 32 packets, repaired 15 packets later, and returns a func
// that feeds it once more, each round respStreamLen PSNs on (the QP's
// per-packet work: receive, drain the control queue, tick), and the
// packets in a round.
func respStream(h *respHarness) (round func(), packets int) {
	const n = respStreamLen
	var frames [][]byte
	var wires []int
	var psns []uint32
	add := func(d respData) {
		s, w := h.encode(d)
		frames, wires, psns = append(frames, append([]byte(nil), h.buf[:s]...)), append(wires, w), append(psns, d.psn)
	}
	for psn := uint32(0); psn < n; psn++ {
		p := psn ^ 1 // pairwise swaps
		switch p % 32 {
		case 5:
			continue
		case 20:
			add(respData{psn: p - 15, flags: orderre.FlagFReTx})
		}
		add(respData{psn: p})
	}
	now := int64(0)
	rounds := uint32(0)
	var cqe []verbs.Completion
	var reps []Repair
	return func() {
		for i, f := range frames {
			ib.PutUint24(f[9:12], (psns[i]+rounds*n)&ib.PSNMask)
			h.rx = verbs.Rx{Data: f, WireLen: wires[i], DstPath: 1}
			if err := h.pkt.Decode(f, wires[i], true); err != nil {
				h.t.Fatal(err)
			}
			h.r.receive(now, &h.rx, &h.pkt)
			for {
				if _, ok := h.r.nextControl(now, h.ctl); !ok {
					break
				}
			}
			h.r.tick(now)
			now += 10
		}
		rounds++
		cqe = h.r.pollCompletions(cqe[:0])
		reps = h.r.pollRepairs(reps[:0])
	}, len(frames)
}

func TestResponderSteadyStateAllocatesNothing(t *testing.T) {
	for _, s := range []Scheme{SchemeMPRDMA, SchemeRandom, SchemeOrderRE} {
		h := newRespHarness(t, respConfig(s), 0)
		round, packets := respStream(h)
		round()
		if h.r.ePSN != respStreamLen {
			t.Fatalf("%v: ePSN %d after one round, losses %d, repaired %d", s, h.r.ePSN, h.stats.LossesDetected, h.stats.Repaired)
		}
		allocs := testing.AllocsPerRun(5, round)
		if allocs != 0 {
			t.Errorf("%v: %v allocations per round of %d packets", s, allocs, packets)
		}
		if h.stats.Repaired == 0 || h.r.ePSN != 7*respStreamLen { // AllocsPerRun runs it once more than asked
			t.Errorf("%v: the stream exercised no repair, or did not complete (ePSN %d)", s, h.r.ePSN)
		}
	}
}

// BenchmarkResponder is the responder's per-packet cost on a reordered
// stream with losses and repairs: decode (as the QP does it), receive,
// the control packets encoded, the timer run; one op is one data packet.
func BenchmarkResponder(b *testing.B) {
	for _, s := range []Scheme{SchemeMPRDMA, SchemeRandom, SchemeOrderRE} {
		b.Run(s.String(), func(b *testing.B) {
			h := newRespHarness(b, respConfig(s), 0)
			round, packets := respStream(h)
			round()
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += packets {
				round()
			}
		})
	}
}

// TestResponderClosedLoop runs the responder against a model sender over
// four paths of different delays with random loss, until every PSN is
// placed: the sender resends what a FNACK names (flagged FReTx), goes
// back N on a NAK or when nothing moved for an RTO, and keeps up to 80
// packets beyond the cumulative ack (more than the bitmap holds). Every
// byte must arrive, the invariants hold after every input, and no scheme
// may stall.
func TestResponderClosedLoop(t *testing.T) {
	for _, s := range []Scheme{SchemeMPRDMA, SchemeRandom, SchemeOrderRE} {
		for _, loss := range []float64{0, 0.01, 0.05} {
			t.Run(fmt.Sprintf("%v/loss=%v", s, loss), func(t *testing.T) {
				respClosedLoop(t, s, loss)
			})
		}
	}
}

type respEvent struct {
	at    int64
	psn   uint32
	retx  bool // sent as a selective retransmission
	sent  int64
	path  uint16
	toSnd bool // a control packet to the sender
	ctl   respCtl
}

func respClosedLoop(t *testing.T, s Scheme, loss float64) {
	const (
		n       = 2000
		gap     = 100 // ns between data packets
		window  = 80
		ackWay  = 1000
		rto     = 20_000
		maxTime = 50_000_000
	)
	cfg := respConfig(s)
	cfg.BDPPackets, cfg.RTO, cfg.RepairTimeout, cfg.BaseRTT = 32, rto, 2*rto, 2000
	h := newRespHarness(t, cfg, 0x00FFFF00)
	rng := rand.New(rand.NewPCG(1, uint64(s)*10+uint64(loss*1000)))
	delay := [4]int64{1000, 1100, 1300, 2000}
	var events []respEvent // kept sorted by time (stable: FIFO among equals)
	push := func(e respEvent) {
		i := sort.Search(len(events), func(i int) bool { return events[i].at > e.at })
		events = append(events, respEvent{})
		copy(events[i+1:], events[i:])
		events[i] = e
	}
	base := uint32(0x00FFFF00)
	rel := func(psn uint32) uint32 { return (psn - base) & ib.PSNMask }
	var sndNxt, cum uint32 // relative
	var retxQ []uint32
	lastProgress := int64(0)
	sendData := func(now int64, psn uint32, retx bool) {
		path := uint16(psn % 4)
		if retx && s == SchemeRandom {
			path = uint16(rng.IntN(4))
		}
		if rng.Float64() < loss {
			return
		}
		push(respEvent{at: now + delay[path] + int64(rng.IntN(50)), psn: psn, retx: retx, sent: now, path: path + 1})
	}
	// Ground truth: holes judged lost that a packet sent before the
	// judgement filled (reordering taken for loss).
	truthSpurious := uint64(0)
	timeouts := 0
	var now int64
	for ; cum < n; now += gap {
		if now > maxTime {
			t.Fatalf("stalled: cum %d, ePSN %d, holes judged %d, stats %+v", cum, h.r.ePSN, h.stats.LossesDetected, h.stats)
		}
		for len(events) > 0 && events[0].at <= now {
			e := events[0]
			events = events[1:]
			if !e.toSnd {
				var flags uint8
				if e.retx && s == SchemeOrderRE {
					flags = orderre.FlagFReTx
				}
				repaired := h.stats.Repaired
				sl := *h.r.slot(uint64(e.psn))
				h.recv(e.at, respData{psn: (base + e.psn) & ib.PSNMask, flags: flags, path: e.path, ev: 0xc000})
				if h.stats.Repaired > repaired && e.sent < sl.detectedAt {
					truthSpurious++
				}
				for _, c := range h.drain(e.at) {
					if rng.Float64() >= loss {
						push(respEvent{at: e.at + ackWay, toSnd: true, ctl: c})
					}
				}
				continue
			}
			c := e.ctl
			switch c.kind() {
			case "ACK":
				if a := rel(c.psn + 1); a > cum && a <= sndNxt+window {
					cum, lastProgress = a, e.at
				}
			case "FNACK":
				retxQ = append(retxQ, rel(c.psn))
			case "NAK":
				if p := rel(c.psn); p < sndNxt {
					sndNxt = p
				}
			default:
				t.Fatalf("unexpected %v", c)
			}
		}
		if dl, ok := h.r.deadline(); ok && dl <= now {
			h.tick(now)
			for _, c := range h.drain(now) {
				push(respEvent{at: now + ackWay, toSnd: true, ctl: c})
			}
		}
		if now-lastProgress > rto {
			sndNxt, lastProgress = cum, now
			timeouts++
		}
		if sndNxt < cum {
			sndNxt = cum
		}
		switch {
		case len(retxQ) > 0:
			p := retxQ[0]
			retxQ = retxQ[1:]
			if p >= cum {
				sendData(now, p, true)
			}
		case sndNxt < n && sndNxt < cum+window:
			sendData(now, sndNxt, false)
			sndNxt++
		}
	}
	if h.r.ePSN != n {
		t.Fatalf("ePSN %d", h.r.ePSN)
	}
	for psn := uint32(0); psn < n; psn++ {
		abs := (base + psn) & ib.PSNMask
		off := h.vaOf(abs) - h.mr.VA
		if !bytes.Equal(h.mr.Buf[off:off+respPMTU], respPattern(abs, respPMTU)) {
			t.Fatalf("PSN %d not placed byte for byte", psn)
		}
	}
	st := h.stats
	if loss > 0 && (st.LossesDetected == 0 || st.Repaired == 0) {
		t.Fatalf("losses %d repaired %d under loss %v", st.LossesDetected, st.Repaired, loss)
	}
	// The rule for spurious losses never counts a repair the responder
	// could know of, and finds every late original where no go-back-N
	// makes the fill ambiguous. (A go-back-N after the sender's own RTO is
	// invisible to the responder: a resend of it that comes sooner than
	// BaseRTT after the hole was judged lost counts as spurious. MP-RDMA's
	// NAKs go back N: a hole's fill may then be the resend or the original,
	// and counts as a repair.)
	if timeouts == 0 && st.SpuriousLosses > truthSpurious || timeouts == 0 && st.NAKsSent == 0 && st.SpuriousLosses != truthSpurious {
		t.Errorf("%d losses counted spurious, %d in truth", st.SpuriousLosses, truthSpurious)
	}
	// The paths' spread (1000 ns, 10 packets) exceeds MP-RDMA's and
	// Random's fixed threshold (BDP/4 = 8) but not OrderRE's measured
	// one: without loss OrderRE judges nothing lost, the others judge
	// reordering lost.
	if loss == 0 && (s == SchemeOrderRE) != (st.LossesDetected == 0) {
		t.Errorf("without loss, %v judged %d holes lost", s, st.LossesDetected)
	}
	if loss == 0 && truthSpurious != st.LossesDetected {
		t.Errorf("without loss, %d of %d holes judged lost filled by their originals", truthSpurious, st.LossesDetected)
	}
	t.Logf("done at %d µs, %d sender timeouts: losses %d spurious %d (truth %d) repaired %d failures %d NAKs %d FNACKs %d overflows %d peak %d mean occupancy %.1f",
		now/1000, timeouts, st.LossesDetected, st.SpuriousLosses, truthSpurious, st.Repaired, st.RetxFailures, st.NAKsSent, st.FNACKsSent, st.BitmapOverflows, st.BitmapPeak, st.OccupancyNs/float64(now))
}

func TestResponderControlQueueBounded(t *testing.T) {
	// Undrained, the queue keeps maxQueuedAcks ACKs and drops the rest
	// (counted); a NAK still gets in.
	cfg := respConfig(SchemeMPRDMA)
	cfg.BitmapEntries = 16
	h := newRespHarness(t, cfg, 0)
	for i := 0; i < maxQueuedAcks+5; i++ {
		h.recv(int64(i), respData{psn: uint32(i)})
	}
	h.recv(10_000, respData{psn: maxQueuedAcks + 100}) // beyond the bitmap
	cs := h.drain(10_000)
	if k := respKinds(cs); k["ACK"] != maxQueuedAcks || k["NAK"] != 1 || h.stats.ControlDropped != 5 {
		t.Fatalf("%v, dropped %d", k, h.stats.ControlDropped)
	}
	var qs verbs.QPStats
	h.r.fill(&qs)
	if qs.ControlPacketsSent != maxQueuedAcks+1 {
		t.Fatalf("sent %d", qs.ControlPacketsSent)
	}
}
