package roce

import (
	"testing"

	"github.com/vcluster/vcluster/verbs"
	"github.com/vcluster/vcluster/verbs/verbstest"
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

// pair is two connected QPs, a (host 0) and b (host 1), wired by
// verbstest and stepped by hand: tests take packets with drain or sendOne
// and hand them over with deliver, at times they choose.
type pair struct {
	t      testing.TB
	a, b   *QP
	ma, mb *verbs.Memory
	now    int64
	buf    []byte
	h      *verbstest.Pair // the harness, for tests that let it pump
}

const qpnA, qpnB = 0x000a11, 0x000b22

// harness describes RoCE to verbstest (conformance_test.go has the
// exported-API twin the conformance suite runs).
func harness(cfg Config) verbstest.Transport {
	return verbstest.Transport{
		Name:   "roce",
		New:    func(mem *verbs.Memory, qpn uint32, seed uint64) verbs.Transport { return New(cfg, mem, qpn, seed) },
		IsData: func(b []byte) bool { return len(b) > 0 && IsWrite(b[0]) },
		MTU:    cfg.PMTU,
		Planes: cfg.Plane + 1,
	}
}

// newPair returns two connected QPs with empty memories (tests register
// their own regions: the first is key 1 at VA 0x10000).
func newPair(t testing.TB, cfg Config) *pair {
	t.Helper()
	// Initial PSNs near the 24-bit wrap.
	h := harness(cfg).NewPair(t, verbstest.Config{QPN: [2]uint32{qpnA, qpnB},
		InitialPSN: [2]uint32{0xFFFFF0, 0xFFFFFA}, Seed: [2]uint64{1, 2}})
	return &pair{t: t, a: h.A.Q.(*QP), b: h.B.Q.(*QP), ma: h.A.Mem, mb: h.B.Mem, buf: make([]byte, verbs.MaxTxBytes), h: h}
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
