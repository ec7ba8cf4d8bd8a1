package mprdma

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/internal/ring"
	"github.com/vcluster/vcluster/internal/rng"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// The requester is a QP's sending half: the posted WRs and their sequence
// space, the per-packet records, one congestion window over all paths
// clocked by ACKs (cc.go), go-back-N, selective and fast (FReTx)
// retransmissions, and the retransmission timer (timers.go). It reads only
// ACKs, NAKs and FNACKs; it shares nothing with the responder but the
// Config and the Stats.
//
// Sequences are 64-bit counters from 0; the wire carries (InitialPSN +
// seq) mod 2^24. una is the oldest sequence not cumulatively acknowledged,
// nxt the next one the window sends (go-back-N rewinds it), max one past
// the highest ever sent, next the first of the next posted WR:
//
//	una ≤ nxt ≤ max ≤ next, and max − una ≤ len(recs)
//
// A record is a packet's state while outstanding ([una, max)): whether it
// is in flight (counted in pipe), selectively acknowledged (the responder
// holds it), sent more than once, queued for a selective retransmission.
// pipe is the packets in flight, the paper's snd_nxt − snd_una − inflate:
// a selective ACK, a loss judgement (FNACK) or a rewind takes a packet out
// of it, every transmission puts it back.
type requester struct {
	q   *QP
	cfg *Config

	wrs  ring.Ring[wrEntry] // posted WRs not completed, oldest first
	next uint64
	una  uint64
	nxt  uint64
	max  uint64
	// ooh is one past the highest sequence acknowledged, selectively or
	// cumulatively (MP-RDMA's snd_ooh + 1): the lag test's reference.
	ooh  uint64
	recs []pktRec
	mask uint64
	pipe int

	win window // cwnd and the ACK-clocked paths (cc.go)

	// retx holds the sequences waiting for a selective retransmission
	// (FNACKed, or judged lost by a timeout), oldest request first; they
	// go before any window-clocked packet and without the window.
	retx ring.Ring[uint64]

	// The last go-back-N: a NAK for the same sequence caused by a packet
	// sent before it is stale (a wire copy, or the NAK of a hole the
	// rewind already covers).
	rewound   bool
	rewindSeq uint64
	rewindAt  int64
	rewindTx  uint32 // txs at the rewind
	// txs counts data transmissions (mod 2^32): a record's tx orders its
	// latest transmission against the rewind, even within one instant.
	txs uint32

	retries int // timeouts since the last progress (IB retry_cnt)
	rto     rtoTimer
	rng     rng.Fast

	hdr roce.Header
}

// pktRec is the requester's record of one outstanding packet.
type pktRec struct {
	sent  int64  // its latest transmission (the first: the RTT sample's start)
	tx    uint32 // requester.txs at its latest transmission
	path  uint8  // the path of its latest transmission
	flags uint8
}

const (
	pkFlying  uint8 = 1 << iota // counted in pipe
	pkSacked                    // selectively acknowledged: the responder holds it
	pkResent                    // sent more than once: no RTT sample, no lag test (Karn)
	pkQueued                    // in retx
	pkFNACKed                   // an FNACK asked for it (the responder asks once per hole)
)

// wrEntry is a posted WR and the sequences it occupies, [first, first+n);
// a zero-length WRITE occupies one.
type wrEntry struct {
	wr    verbs.WorkRequest
	first uint64
	n     uint64
}

func (w *wrEntry) end() uint64 { return w.first + w.n }

// sendKind says why a data packet goes.
type sendKind uint8

const (
	sendWindow    sendKind = iota // new data or a go-back-N resend, under the window
	sendSelective                 // a selective retransmission (OrderRE: an FReTx)
)

func (r *requester) init(q *QP, rg rng.Fast) {
	r.q, r.cfg, r.rng = q, &q.cfg, rg
	// Outstanding packets are at most the window plus those the responder
	// holds (its bitmap) beyond the ones in flight: records for both, and
	// the window never sends past them (no growth, no allocation).
	n := uint64(1)
	for n < uint64(r.cfg.MaxCwnd+r.cfg.BitmapEntries+1) {
		n <<= 1
	}
	r.recs, r.mask = make([]pktRec, n), n-1
	r.win.init(r.cfg)
}

func (r *requester) rec(seq uint64) *pktRec { return &r.recs[seq&r.mask] }

func (r *requester) psnOf(seq uint64) uint32 {
	return ib.PSNAdd(r.q.local.InitialPSN, int(seq&ib.PSNMask))
}

// seqOf maps a PSN to an outstanding sequence in [una, max).
func (r *requester) seqOf(psn uint32) (uint64, bool) {
	d := ib.PSNDiff(psn, r.psnOf(r.una))
	if d < 0 || uint64(d) >= r.max-r.una {
		return 0, false
	}
	return r.una + uint64(d), true
}

// recent maps a PSN to a sequence sent whose record is still its own:
// [max − len(recs), max), acknowledged or not.
func (r *requester) recent(psn uint32) (uint64, bool) {
	d := ib.PSNDiff(psn, r.psnOf(r.una))
	if d >= 0 {
		return r.seqOf(psn)
	}
	back := uint64(-d)
	if back > r.una || r.una-back+uint64(len(r.recs)) <= r.max {
		return 0, false
	}
	return r.una - back, true
}

// cumOf maps a cumulative ack (the PSN of ePSN − 1) to the sequence it
// acknowledges up to, in [una, max].
func (r *requester) cumOf(psn uint32) (uint64, bool) {
	d := ib.PSNDiff(psn, r.psnOf(r.una))
	if d < -1 || uint64(d+1) > r.max-r.una {
		return 0, false
	}
	return r.una + uint64(d+1), true
}

// post queues wr.
func (r *requester) post(wr verbs.WorkRequest) {
	mtu := uint64(r.cfg.PMTU)
	n := max((wr.Length+mtu-1)/mtu, 1)
	r.wrs.Push(wrEntry{wr: wr, first: r.next, n: n})
	r.next += n
}

// find returns the index of the WR holding seq (in [una, next)).
func (r *requester) find(seq uint64) int {
	lo, hi := 0, r.wrs.Len()-1
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if r.wrs.At(m).first <= seq {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// send produces the next data packet: a selective retransmission first,
// then a window-clocked one (a go-back-N resend or new data).
func (r *requester) send(now int64, free uint32, buf []byte) (verbs.Tx, bool) {
	for r.retx.Len() > 0 {
		s := *r.retx.Front()
		if s < r.una {
			r.retx.Pop()
			continue
		}
		p := r.rec(s)
		if p.flags&pkSacked != 0 {
			p.flags &^= pkQueued
			r.retx.Pop()
			continue
		}
		// A path drawn at random (the QP's seeded RNG): Random's
		// retransmission path, and where an FReTx goes when the
		// sender's ToR has no group for it.
		path := r.freePath(int(r.rng.Uint64()%uint64(r.cfg.Paths)), free)
		if path < 0 {
			return verbs.Tx{}, false
		}
		r.retx.Pop()
		p.flags &^= pkQueued
		return r.emit(now, s, path, sendSelective, buf), true
	}
	if r.nxt >= r.next {
		r.win.clocked.Clear() // nothing to clock: an ACK's credit is not banked
		return verbs.Tx{}, false
	}
	if r.nxt == r.max && r.max-r.una >= uint64(len(r.recs)) {
		return verbs.Tx{}, false
	}
	if !r.win.open(r.pipe) {
		return verbs.Tx{}, false
	}
	want, clocked := r.win.nextPath()
	path := r.freePath(want, free)
	if path < 0 {
		return verbs.Tx{}, false
	}
	r.win.took(path, clocked)
	return r.emit(now, r.nxt, path, sendWindow, buf), true
}

// plane is the NIC port path i leaves on; spine is its path address
// within that plane (Tx.DstPath − 1): paths go round the planes first, so
// Planes × spines paths name every (plane, spine) pair once.
func (r *requester) plane(path int) int { return path % r.cfg.Planes }
func (r *requester) spine(path int) int { return path / r.cfg.Planes }

// pathOf is the path an acknowledgement speaks for: the path address it
// left from (Rx.SrcPath − 1) on the plane it came back on; −1 if neither
// names one of the QP's paths.
func (r *requester) pathOf(rx *verbs.Rx) int {
	if rx.SrcPath == 0 {
		return -1
	}
	path := (int(rx.SrcPath)-1)*r.cfg.Planes + rx.Plane%r.cfg.Planes
	if path >= r.cfg.Paths {
		return -1
	}
	return path
}

// freePath returns want, or when its plane's port is full the next path
// (in path order) whose port has room, or −1. With one plane (a
// leaf-spine NIC) it is want or −1.
func (r *requester) freePath(want int, free uint32) int {
	n := r.cfg.Paths
	for k := range n {
		p := (want + k) % n
		if free&(1<<uint(r.plane(p))) != 0 {
			return p
		}
	}
	return -1
}

// emit encodes data packet seq onto path into buf and advances the send
// state.
func (r *requester) emit(now int64, seq uint64, path int, kind sendKind, buf []byte) verbs.Tx {
	q := r.q
	w := r.wrs.At(r.find(seq))
	idx := seq - w.first
	mtu := uint64(r.cfg.PMTU)
	off := idx * mtu
	n := uint64(0)
	if w.wr.Length > 0 {
		n = min(mtu, w.wr.Length-off)
	}
	last := idx == w.n-1
	imm := w.wr.Op == verbs.OpWriteImm
	h := &r.hdr
	*h = roce.Header{BTH: ib.BTH{PKey: roce.DefaultPKey, DestQP: q.peer.QPN, PSN: r.psnOf(seq)}}
	switch {
	case w.n == 1 && imm:
		h.Opcode = roce.OpWriteOnlyImm
	case w.n == 1:
		h.Opcode = roce.OpWriteOnly
	case idx == 0:
		h.Opcode = roce.OpWriteFirst
	case last && imm:
		h.Opcode = roce.OpWriteLastImm
	case last:
		h.Opcode = roce.OpWriteLast
	default:
		h.Opcode = roce.OpWriteMiddle
	}
	h.AckReq = last
	// A RETH on every packet (its own VA; DMALen the whole message, which
	// the responder's WriteImm completion reads from the last packet).
	h.RETH = roce.RETH{VA: w.wr.RemoteVA + off, RKey: w.wr.RemoteKey, DMALen: uint32(w.wr.Length)}
	if last && imm {
		h.Imm = w.wr.Imm
	}
	var payload []byte
	if n > 0 {
		payload, _ = q.mem.Bytes(w.wr.LocalKey, w.wr.LocalVA+off, n)
	}
	stored, wire, err := roce.Encode(buf, h, true, payload, int(n))
	if err != nil {
		panic("mprdma: Send buffer shorter than verbs.MaxTxBytes")
	}
	if r.cfg.Scheme == SchemeOrderRE {
		switch {
		case kind == sendSelective:
			orderre.SetFlags(buf, orderre.FlagFReTx)
			orderre.SetCopies(buf, r.cfg.Copies)
			q.mp.FReTxSent++
		case seq == r.max:
			// Group create on the first packet after the QP was idle,
			// delete on the last one posted (seed 004 §3.1.2); one packet
			// may carry both.
			if r.una == r.max {
				orderre.SetFlags(buf, orderre.FlagCreate)
				q.mp.GroupCreates++
			}
			if seq == r.next-1 {
				orderre.SetFlags(buf, orderre.FlagDelete)
				q.mp.GroupDeletes++
			}
		}
	}

	p := r.rec(seq)
	if seq == r.max {
		*p = pktRec{}
		r.max++
		q.stats.DataPacketsSent++
	} else {
		p.flags |= pkResent
		q.stats.Retransmissions++
		if kind == sendSelective {
			q.mp.SelectiveRetx++
		}
	}
	p.sent, p.tx, p.path = now, r.txs, uint8(path)
	r.txs++
	if p.flags&pkFlying == 0 {
		p.flags |= pkFlying
		r.pipe++
	}
	if kind == sendWindow {
		r.nxt = seq + 1
	}
	q.mp.PathSends[path]++
	if !r.rto.on {
		r.arm(now)
	}
	return verbs.Tx{Len: stored, WireLen: wire, DstHost: q.peer.Host, EV: q.ev | uint32(r.plane(path)),
		DSCP: verbs.DSCPRoCE, ECT: true, DstPath: uint16(r.spine(path) + 1)}
}

// receive handles an ACKNOWLEDGE packet: an ACK, an FNACK, a go-back-N NAK
// or an error NAK.
func (r *requester) receive(now int64, rx *verbs.Rx, p *roce.Packet, fnack bool) {
	a := p.AETH
	switch {
	case fnack:
		r.onFNACK(now, p)
	case a.IsACK():
		r.onAck(now, rx, p)
	case a.IsNAK() && a.Code() == roce.NakPSNSeqError:
		r.onNAK(now, p)
	case a.IsNAK():
		r.onErrorNAK(now, p)
	}
}

// onAck: the BTH PSN is the cumulative ack, the AETH MSN field the PSN of
// the data packet it answers (a selective ack), the BECN the ECN echo, the
// source path the path the data came on.
func (r *requester) onAck(now int64, rx *verbs.Rx, p *roce.Packet) {
	lagging := false
	if s, ok := r.recent(p.AETH.MSN); ok {
		rec := r.rec(s)
		if s >= r.una && rec.flags&pkFlying != 0 {
			rec.flags &^= pkFlying
			r.pipe--
		}
		if rec.flags&pkSacked == 0 {
			// A packet below una was acknowledged cumulatively by ACKs
			// that overtook its own over faster paths: its ACK still
			// measures its path.
			rec.flags |= pkSacked
			if rec.flags&pkResent == 0 {
				r.rttSample(now - rec.sent)
				// MP-RDMA's Δ rule: an ACK more than SlowPathLag behind
				// the highest acknowledged packet came over a path too
				// slow to keep clocking.
				lagging = s+uint64(r.cfg.SlowPathLag)+1 < r.ooh
			}
			r.ooh = max(r.ooh, s+1)
		}
	}
	if cum, ok := r.cumOf(p.PSN); ok {
		r.ackTo(now, cum)
	}
	r.win.onAck(p.BECN)
	if r.nxt < r.next {
		path := r.pathOf(rx)
		if path >= 0 && lagging && r.cfg.Paths > 1 {
			r.q.mp.SlowPathAcks++
			path = (path + 1 + int(r.rng.Uint64()%uint64(r.cfg.Paths-1))) % r.cfg.Paths
		}
		r.win.clock(path, r.pipe)
	}
}

// onNAK: a PSN sequence error for ePSN (bitmap overflow, MP-RDMA's loss,
// OrderRE's fallback): everything below is placed; go back N from there.
func (r *requester) onNAK(now int64, p *roce.Packet) {
	d := ib.PSNDiff(p.PSN, r.psnOf(r.una))
	if d < 0 || uint64(d) > r.max-r.una {
		return
	}
	seq := r.una + uint64(d)
	r.q.stats.NacksReceived++
	r.ackTo(now, seq)
	if seq >= r.max {
		return
	}
	// A second NAK for the sequence just rewound to is stale when the
	// packet that caused it (the MSN field: an arrival beyond the bitmap,
	// a hole) was last sent before the rewind, or when it comes within
	// RTO/2 of it: the responder NAKs one ePSN at most once per RTO, so
	// that is a copy. A lost resend is NAKed again later, or times out.
	if r.rewound && r.rewindSeq == seq {
		if now-r.rewindAt < r.cfg.RTO/2 {
			return
		}
		if t, ok := r.seqOf(p.AETH.MSN); ok && int32(r.rec(t).tx-r.rewindTx) < 0 {
			return
		}
	}
	r.goBack(now, seq)
}

// goBack rewinds the window to from (= una): everything from there is
// resent in order, under the window, and nothing of it is in flight.
func (r *requester) goBack(now int64, from uint64) {
	for s := from; s < r.max; s++ {
		p := r.rec(s)
		if p.flags&pkFlying != 0 {
			r.pipe--
		}
		p.flags &^= pkFlying | pkQueued
	}
	r.retx.Clear()
	r.nxt = from
	r.rewound, r.rewindSeq, r.rewindAt, r.rewindTx = true, from, now, r.txs
	r.q.mp.GoBackNs++
}

// onFNACK: the BTH PSN is the lost PSN, the MSN field the cumulative ack.
// The lost packet leaves the pipe and is queued for one selective
// retransmission (Random: on a random path; OrderRE: an FReTx).
func (r *requester) onFNACK(now int64, p *roce.Packet) {
	r.q.stats.NacksReceived++
	if cum, ok := r.cumOf(p.AETH.MSN); ok {
		r.ackTo(now, cum)
	}
	s, ok := r.seqOf(p.PSN)
	if !ok {
		return
	}
	rec := r.rec(s)
	if rec.flags&(pkSacked|pkFNACKed) != 0 {
		return // held already, or asked for before (this FNACK is a copy)
	}
	rec.flags |= pkFNACKed
	r.lose(s)
}

// lose takes s out of the pipe and queues its selective retransmission.
func (r *requester) lose(s uint64) {
	p := r.rec(s)
	if p.flags&pkFlying != 0 {
		p.flags &^= pkFlying
		r.pipe--
	}
	if p.flags&pkQueued == 0 {
		p.flags |= pkQueued
		r.retx.Push(s)
	}
}

// onErrorNAK: the responder failed (remote access, invalid request). The
// PSN is the failing packet's, the MSN field the cumulative ack; the WR
// holding the failing packet completes with the matching status, the rest
// are flushed, and the QP goes to ERROR.
func (r *requester) onErrorNAK(now int64, p *roce.Packet) {
	r.q.stats.NacksReceived++
	if cum, ok := r.cumOf(p.AETH.MSN); ok {
		r.ackTo(now, cum)
	}
	st := verbs.StatusRemoteOp
	if p.AETH.Code() == roce.NakRemoteAccess {
		st = verbs.StatusRemoteAccess
	}
	seq, ok := r.seqOf(p.PSN)
	if !ok {
		seq = r.una
	}
	r.q.fail(st, seq)
}

// ackTo acknowledges every sequence below cum (in [una, max]) and
// completes the WRs it covers, in order. It reports progress.
func (r *requester) ackTo(now int64, cum uint64) bool {
	if cum <= r.una {
		return false
	}
	for s := r.una; s < cum; s++ {
		if p := r.rec(s); p.flags&pkFlying != 0 {
			p.flags &^= pkFlying
			r.pipe--
		}
	}
	r.una = cum
	r.nxt = max(r.nxt, cum)
	r.ooh = max(r.ooh, cum)
	r.retries = 0
	q := r.q
	for r.wrs.Len() > 0 {
		w := r.wrs.Front()
		if w.end() > cum {
			break
		}
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: verbs.StatusOK, Bytes: w.wr.Length})
		q.stats.BytesCompleted += w.wr.Length
		r.wrs.Pop()
	}
	r.progress(now)
	return true
}

// rttSample records one RTT from a packet sent once.
func (r *requester) rttSample(rtt int64) {
	s := &r.q.stats
	s.RTTSamples++
	s.LastRTT = rtt
	if s.MinRTT == 0 || rtt < s.MinRTT {
		s.MinRTT = rtt
	}
}

// flush completes every queued WR, the one holding seq (when at) with st
// and the others FLUSHED, and stops sending.
func (r *requester) flush(st verbs.Status, seq uint64, at bool) {
	q := r.q
	for i := 0; i < r.wrs.Len(); i++ {
		w := r.wrs.At(i)
		s := verbs.StatusFlushed
		if at && w.first <= seq && seq < w.end() {
			s = st
		}
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: s})
	}
	r.wrs.Clear()
	r.retx.Clear()
	r.win.clocked.Clear()
	r.rto.on = false
}

// fail completes the WR holding seq with st, flushes the rest and moves
// the QP to ERROR.
func (q *QP) fail(st verbs.Status, seq uint64) {
	q.req.flush(st, seq, true)
	q.state = verbs.QPError
}
