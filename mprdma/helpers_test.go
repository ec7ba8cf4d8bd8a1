package mprdma

import (
	"testing"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// Requester-side test helpers. The package's tests run with the QP's
// invariants checked at every entry (the conformance suite in package
// mprdma_test shares the binary, so it runs with them too).
func init() { debugInvariants = true }

const (
	reqHostA, reqHostB = 0, 1
	reqQPNA, reqQPNB   = 0x000a11, 0x000b22
	reqPSNA, reqPSNB   = 0xFFFFF0, 0x000100 // A's PSNs wrap during the tests
)

// reqPair is a requester QP (A, host 0) under test and a peer QP (B) whose
// responder tests may use; tests usually forge B's control packets with
// ack, nak and fnack and hand them to A themselves.
type reqPair struct {
	t      testing.TB
	a, b   *QP
	ma, mb *verbs.Memory
	src    *verbs.MR
	dst    *verbs.MR
	now    int64
	buf    []byte
}

// newReqPair connects A and B running cfg, with a size-byte region on each.
func newReqPair(t testing.TB, cfg Config, size int) *reqPair {
	t.Helper()
	p := &reqPair{t: t, ma: &verbs.Memory{}, mb: &verbs.Memory{}, buf: make([]byte, verbs.MaxTxBytes)}
	p.src = p.ma.Register(make([]byte, size))
	p.dst = p.mb.Register(make([]byte, size))
	for i := range p.src.Buf {
		p.src.Buf[i] = byte(i*7 + 3)
	}
	p.a = New(cfg, p.ma, reqQPNA, 1)
	p.b = New(cfg, p.mb, reqQPNB, 2)
	la := verbs.QPAttrs{Host: reqHostA, QPN: reqQPNA, InitialPSN: reqPSNA}
	lb := verbs.QPAttrs{Host: reqHostB, QPN: reqQPNB, InitialPSN: reqPSNB}
	if err := p.a.Connect(la, lb); err != nil {
		t.Fatal(err)
	}
	if err := p.b.Connect(lb, la); err != nil {
		t.Fatal(err)
	}
	return p
}

// write posts a Write (or WriteImm when imm) of n bytes at offset off.
func (p *reqPair) write(id uint64, off, n uint64, imm bool) {
	p.t.Helper()
	op := verbs.OpWrite
	if imm {
		op = verbs.OpWriteImm
	}
	wr := verbs.WorkRequest{ID: id, Op: op, LocalKey: p.src.Key, LocalVA: p.src.VA + off, Length: n,
		RemoteKey: p.dst.Key, RemoteVA: p.dst.VA + off, Imm: uint32(id)}
	if err := p.a.Post(p.now, wr); err != nil {
		p.t.Fatal(err)
	}
}

// sent is one data packet A sent, decoded.
type sent struct {
	tx    verbs.Tx
	data  []byte
	psn   uint32
	seq   uint64 // psn − reqPSNA
	path  int    // Tx.DstPath − 1
	flags uint8  // OrderRE bits of BTH byte 8
	sig   orderre.Signal
}

// sendData takes up to max packets from A (all planes free), failing on a
// control packet.
func (p *reqPair) sendData(max int) []sent {
	p.t.Helper()
	return p.sendFree(max, ^uint32(0))
}

func (p *reqPair) sendFree(max int, free uint32) []sent {
	p.t.Helper()
	var out []sent
	for len(out) < max {
		tx, ok := p.a.Send(p.now, free, p.buf)
		if !ok {
			break
		}
		b := append([]byte(nil), p.buf[:tx.Len]...)
		pk, err := roce.Decode(b, tx.WireLen, true)
		if err != nil || !roce.IsWrite(pk.Opcode) {
			p.t.Fatalf("A sent %x (err %v), want a data packet", b, err)
		}
		if tx.DSCP != verbs.DSCPRoCE || !tx.ECT || tx.DstHost != reqHostB || tx.DstPath == 0 {
			p.t.Fatalf("data packet Tx %+v: want DSCP RoCE, ECT, host B, a path", tx)
		}
		sig := orderre.Read(b)
		out = append(out, sent{tx: tx, data: b, psn: pk.PSN, seq: uint64(ib.PSNDiff(pk.PSN, reqPSNA)),
			path: int(tx.DstPath) - 1, flags: sig.Flags, sig: sig})
	}
	return out
}

// seqs returns the packets' sequences.
func seqs(ps []sent) []uint64 {
	var r []uint64
	for _, x := range ps {
		r = append(r, x.seq)
	}
	return r
}

// paths returns the packets' paths.
func paths(ps []sent) []int {
	var r []int
	for _, x := range ps {
		r = append(r, x.path)
	}
	return r
}

// ctl hands A a control packet as B's responder would build it: syndrome,
// BTH PSN, AETH MSN, BECN, from path (−1: a host address).
func (p *reqPair) ctl(syndrome uint8, psn, msn uint32, becn bool, path int) {
	p.t.Helper()
	h := roce.Header{BTH: ib.BTH{Opcode: roce.OpAck, PKey: roce.DefaultPKey, DestQP: reqQPNA, PSN: psn & ib.PSNMask, BECN: becn}}
	h.AETH = roce.AETH{Syndrome: syndrome, MSN: msn & ib.PSNMask}
	b := make([]byte, 64)
	n, wire, err := roce.Encode(b, &h, true, nil, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	p.a.Receive(p.now, &verbs.Rx{Data: b[:n], WireLen: wire, SrcHost: reqHostB, SrcPath: uint16(path + 1)})
}

// psnA is A's PSN of sequence seq.
func psnA(seq uint64) uint32 { return (reqPSNA + uint32(seq)) & ib.PSNMask }

// ack acknowledges data sequence s with cumulative ack up to (not
// including) cum, arriving on path.
func (p *reqPair) ack(cum, s uint64, ecn bool, path int) {
	p.t.Helper()
	p.ctl(syndromeACK, psnA(cum)-1, psnA(s), ecn, path)
}

// nak is a go-back-N NAK for ePSN e, caused by sequence cause.
func (p *reqPair) nak(e, cause uint64) {
	p.t.Helper()
	p.ctl(ib.SyndromeNAK|ib.NakPSNSeqError, psnA(e), psnA(cause), false, 0)
}

// fnack asks for sequence lost, the cumulative ack below cum.
func (p *reqPair) fnack(lost, cum uint64) {
	p.t.Helper()
	p.ctl(orderre.SyndromeFNACK, psnA(lost), psnA(cum)-1, false, 0)
}

// comps polls A's completions.
func (p *reqPair) comps() []verbs.Completion { return p.a.PollCompletions(nil) }
