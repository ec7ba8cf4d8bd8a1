package roce

import (
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// wirePkt is one packet taken from Send.
type wirePkt struct {
	data []byte
	tx   verbs.Tx
}

func (w wirePkt) hdr(t testing.TB, irn bool) Packet {
	t.Helper()
	p, err := Decode(w.data, w.tx.WireLen, irn)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return p
}

// pair is two connected QPs, a (host 0) and b (host 1), wired by hand.
type pair struct {
	t      testing.TB
	a, b   *QP
	ma, mb *verbs.Memory
	now    int64
	buf    []byte
}

const qpnA, qpnB = 0x000a11, 0x000b22

func newPair(t testing.TB, cfg Config) *pair {
	t.Helper()
	p := &pair{t: t, ma: &verbs.Memory{}, mb: &verbs.Memory{}, buf: make([]byte, verbs.MaxTxBytes)}
	p.a = New(cfg, p.ma, qpnA, 1)
	p.b = New(cfg, p.mb, qpnB, 2)
	// Initial PSNs near the 24-bit wrap.
	aa := verbs.QPAttrs{Host: 0, QPN: qpnA, InitialPSN: 0xFFFFF0}
	ba := verbs.QPAttrs{Host: 1, QPN: qpnB, InitialPSN: 0xFFFFFA}
	if err := p.a.Connect(aa, ba); err != nil {
		t.Fatal(err)
	}
	if err := p.b.Connect(ba, aa); err != nil {
		t.Fatal(err)
	}
	return p
}

// drain takes every packet q will send, advancing time over pacing waits.
func (p *pair) drain(q *QP) []wirePkt {
	var out []wirePkt
	for {
		tx, ok := q.Send(p.now, ^uint32(0), p.buf)
		if !ok && q.paceWait {
			p.now = q.paceAt
			continue
		}
		if !ok {
			return out
		}
		out = append(out, wirePkt{append([]byte(nil), p.buf[:tx.Len]...), tx})
	}
}

// sendOne takes one packet from q, advancing time over a pacing wait.
func (p *pair) sendOne(q *QP) (wirePkt, bool) {
	tx, ok := q.Send(p.now, ^uint32(0), p.buf)
	if !ok && q.paceWait {
		p.now = q.paceAt
		tx, ok = q.Send(p.now, ^uint32(0), p.buf)
	}
	if !ok {
		return wirePkt{}, false
	}
	return wirePkt{append([]byte(nil), p.buf[:tx.Len]...), tx}, true
}

func (p *pair) deliver(to *QP, w wirePkt, ce bool) {
	from := 0
	if to == p.a {
		from = 1
	}
	to.Receive(p.now, &verbs.Rx{Data: w.data, WireLen: w.tx.WireLen, SrcHost: from, CE: ce})
}

func (p *pair) deliverAll(to *QP, ws []wirePkt) {
	for _, w := range ws {
		p.deliver(to, w, false)
	}
}

// psns returns the packets' PSNs.
func psns(t testing.TB, ws []wirePkt, irn bool) []uint32 {
	var r []uint32
	for _, w := range ws {
		r = append(r, w.hdr(t, irn).PSN)
	}
	return r
}

func fill(b []byte, seed byte) {
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
}

func noCC() Config {
	c := DefaultConfig()
	c.CC = CCNone
	return c
}

func irnCfg() Config {
	c := noCC()
	c.Reliability = IRN
	return c
}
