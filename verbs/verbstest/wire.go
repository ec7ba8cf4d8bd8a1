package verbstest

import (
	"slices"

	"github.com/vcluster/vcluster/verbs"
)

// Dir is the direction a packet travels.
type Dir uint8

const (
	AtoB Dir = iota // from A (host 0) to B (host 1)
	BtoA
)

func (d Dir) String() string { return [...]string{"A→B", "B→A"}[d] }

// Packet is one packet a QP sent, as the hooks see it. Hooks may read it;
// they must not change it (Delay and friends say what to do with it).
type Packet struct {
	Dir  Dir
	Seq  int    // index among the packets sent in Dir, from 0
	Data bool   // carries Write data (Transport.IsData)
	PSN  uint32 // Transport.PSN
	// DataSeq is the index among the distinct data PSNs sent in Dir, from
	// 0, so "the k-th data packet" means the same PSN on resends; -1 for
	// control packets.
	DataSeq int
	// Attempt counts earlier sends of this data PSN in Dir: 0 for the
	// first transmission.
	Attempt int
	SentAt  int64
	Tx      verbs.Tx
	Bytes   []byte // what Send wrote: Tx.Len bytes (a copy)
}

// First reports whether p is the first transmission of a data packet.
func (p *Packet) First() bool { return p.Data && p.Attempt == 0 }

type hookKind uint8

const (
	hookDrop hookKind = iota
	hookDuplicate
	hookDelay
	hookReorder
	hookTrim
)

type hook struct {
	kind  hookKind
	match func(*Packet) bool
	d     int64
}

// flight is a packet on the wire.
type flight struct {
	at      int64  // arrival time
	order   uint64 // tie-break: FIFO among equal arrival times
	to      int    // 0 A, 1 B
	held    bool   // Reorder: waits for the next packet of its direction
	data    []byte // delivered bytes (cut when trimmed)
	wireLen int
	trimmed bool
	tx      verbs.Tx
}

// Drop discards packets match selects.
func (p *Pair) Drop(match func(*Packet) bool) {
	p.hooks = append(p.hooks, hook{kind: hookDrop, match: match})
}

// Duplicate delivers packets match selects twice, the copy right after.
func (p *Pair) Duplicate(match func(*Packet) bool) {
	p.hooks = append(p.hooks, hook{kind: hookDuplicate, match: match})
}

// Delay adds d ns to the one-way latency of packets match selects.
func (p *Pair) Delay(match func(*Packet) bool, d int64) {
	p.hooks = append(p.hooks, hook{kind: hookDelay, match: match, d: d})
}

// Reorder holds packets match selects until the next packet of their
// direction has arrived, then delivers them (swapping the two), or after
// ReorderHold ns when no packet follows.
func (p *Pair) Reorder(match func(*Packet) bool) {
	p.hooks = append(p.hooks, hook{kind: hookReorder, match: match})
}

// Trim cuts data packets match selects to Transport.HeaderLen bytes and
// delivers them with Rx.Trimmed set, as a switch does. Only packets a
// switch may trim (DSCP trimmable, trimmable retransmission) are; a
// transport without HeaderLen is never trimmed.
func (p *Pair) Trim(match func(*Packet) bool) {
	p.hooks = append(p.hooks, hook{kind: hookTrim, match: match})
}

// ClearHooks removes every hook: the wire delivers everything from now on.
func (p *Pair) ClearHooks() { p.hooks = p.hooks[:0] }

// WireStats counts what the wire did, per direction.
type WireStats struct {
	Sent, Delivered, Dropped, Duplicated, Trimmed, Reordered int
}

func trimmable(dscp uint8) bool {
	return dscp == verbs.DSCPTrimmable || dscp == verbs.DSCPTrimmableRetx
}

// transmit puts what from's Send wrote into buf on the wire, through the
// hooks.
func (p *Pair) transmit(from int, tx verbs.Tx, buf []byte) {
	dir := Dir(from)
	ws := &p.Wire[dir]
	pk := &Packet{Dir: dir, Seq: ws.Sent, SentAt: p.Now, Tx: tx, Bytes: slices.Clone(buf[:tx.Len]), DataSeq: -1}
	ws.Sent++
	pk.Data = p.tr.IsData(pk.Bytes)
	pk.PSN = p.tr.psn(pk.Bytes)
	if pk.Data {
		seen := p.seen[dir]
		if n, ok := seen[pk.PSN]; ok {
			pk.Attempt = n.attempts
			pk.DataSeq = n.seq
			n.attempts++
			seen[pk.PSN] = n
		} else {
			pk.DataSeq = p.dataSeq[dir]
			p.dataSeq[dir]++
			seen[pk.PSN] = psnSeen{seq: pk.DataSeq, attempts: 1}
		}
	}
	if p.OnSend != nil {
		p.OnSend(pk)
	}
	f := flight{at: p.Now + p.latency, to: 1 - from, data: pk.Bytes, wireLen: tx.WireLen, tx: tx}
	dup, reorder := false, false
	for _, h := range p.hooks {
		if !h.match(pk) {
			continue
		}
		switch h.kind {
		case hookDrop:
			ws.Dropped++
			return
		case hookDuplicate:
			dup = true
		case hookDelay:
			f.at += h.d
		case hookReorder:
			reorder = true
		case hookTrim:
			if p.tr.HeaderLen != nil && pk.Data && trimmable(tx.DSCP) && !f.trimmed {
				n := min(p.tr.HeaderLen(pk.Bytes), len(f.data))
				f.data, f.wireLen, f.trimmed = f.data[:n], n, true
				ws.Trimmed++
			}
		}
	}
	f.order = p.nextOrder()
	// A packet sent now releases its direction's held packets right behind it.
	released := false
	for i := range p.inFlight {
		g := &p.inFlight[i]
		if g.held && g.to == f.to {
			g.held, g.at, g.order = false, max(g.at-p.ReorderHold, f.at), p.nextOrder()
			released = true
		}
	}
	if released {
		slices.SortFunc(p.inFlight, flightCmp)
	}
	if reorder {
		ws.Reordered++
		f.held = true
		f.at += p.ReorderHold
	}
	p.enqueue(f)
	if dup {
		ws.Duplicated++
		f.order = p.nextOrder()
		f.data = slices.Clone(f.data) // a transport may scribble on what it receives
		p.enqueue(f)
	}
}

func (p *Pair) nextOrder() uint64 { p.order++; return p.order }

// enqueue inserts f into the wire, which is ordered by arrival time, then
// by send order.
func (p *Pair) enqueue(f flight) {
	i, _ := slices.BinarySearchFunc(p.inFlight, f, flightCmp)
	p.inFlight = slices.Insert(p.inFlight, i, f)
}

func flightCmp(a, b flight) int {
	switch {
	case a.at != b.at:
		if a.at < b.at {
			return -1
		}
		return 1
	case a.order < b.order:
		return -1
	case a.order > b.order:
		return 1
	}
	return 0
}

type psnSeen struct{ seq, attempts int }
