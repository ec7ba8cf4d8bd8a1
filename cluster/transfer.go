package cluster

import (
	"fmt"

	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// Transfer is one bulk RDMA write: Length bytes from Src (on the pair's A
// side) to Dst (on B) in work requests of Chunk bytes, the last a
// WriteImm. It takes over both sides' CQ handlers.
type Transfer struct {
	Pair          Pair
	Src, Dst      *verbs.MR
	Length, Chunk uint64

	Start, End   sim.Time // post time; time of the last requester completion
	RecvImmAt    sim.Time // when the responder saw the WriteImm
	Completed    uint64   // bytes whose work requests completed OK
	Errors       []verbs.Completion
	wrs, doneWRs int
	loop         *sim.Loop
}

// StartTransfer posts the transfer's work requests now.
func (c *Cluster) StartTransfer(p Pair, src, dst *verbs.MR, length, chunk uint64) (*Transfer, error) {
	if chunk == 0 || length == 0 || length > src.Len || length > dst.Len {
		return nil, fmt.Errorf("cluster: transfer of %d bytes in %d-byte chunks does not fit regions of %d and %d", length, chunk, src.Len, dst.Len)
	}
	// Each side's handler runs on its host's loop (one per partition in a
	// partitioned run).
	la, lb := c.Hosts[p.A.Host].Loop(), c.Hosts[p.B.Host].Loop()
	t := &Transfer{Pair: p, Src: src, Dst: dst, Length: length, Chunk: chunk, Start: la.Now(), loop: la}
	p.A.CQ.Handler = func(x verbs.Completion) {
		t.doneWRs++
		if x.Status != verbs.StatusOK {
			t.Errors = append(t.Errors, x)
		} else {
			t.Completed += x.Bytes
		}
		if t.doneWRs == t.wrs {
			t.End = t.loop.Now()
		}
	}
	p.B.CQ.Handler = func(x verbs.Completion) {
		if x.Op == verbs.OpRecvImm {
			t.RecvImmAt = lb.Now()
		}
	}
	for off := uint64(0); off < length; off += chunk {
		n := min(chunk, length-off)
		op := verbs.OpWrite
		if off+n == length {
			op = verbs.OpWriteImm
		}
		wr := verbs.WorkRequest{ID: uint64(t.wrs), Op: op, LocalKey: src.Key, LocalVA: src.VA + off, Length: n,
			RemoteKey: dst.Key, RemoteVA: dst.VA + off, Imm: uint32(t.wrs)}
		if err := p.A.Engine.Post(p.A.T.QPN(), wr); err != nil {
			return nil, err
		}
		t.wrs++
	}
	return t, nil
}

// Done reports whether every work request completed (OK or not).
func (t *Transfer) Done() bool { return t.doneWRs == t.wrs }

// AllDone reports whether every transfer of trs is Done.
func AllDone(trs []*Transfer) bool {
	for _, t := range trs {
		if !t.Done() {
			return false
		}
	}
	return true
}

// GoodputBps is the completed bytes over the transfer's duration.
func (t *Transfer) GoodputBps() float64 {
	if t.End <= t.Start {
		return 0
	}
	return float64(t.Completed) * 8 / (float64(t.End-t.Start) / 1e9)
}
