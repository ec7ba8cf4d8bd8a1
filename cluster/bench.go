package cluster

import (
	"fmt"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// P2PResult is the outcome of one point-to-point transfer benchmark.
type P2PResult struct {
	Bytes         uint64
	VirtualTime   sim.Time
	GoodputBps    float64
	LineRateBps   float64 // the sender's aggregate NIC rate
	DataPackets   uint64  // data packets sent, first transmissions + retransmissions
	Retransmitted uint64
	Timeouts      uint64
	Events        uint64
	Verified      bool // destination compared equal to the source (real payload only)
}

// RunP2P moves n bytes from host a to host b on one connection of the
// configured transport (transport.qpsPerConnection QPs, the bytes split
// evenly), with Bernoulli loss at rate loss on every link (every direction),
// and returns the measurements. With transport.payload=real it also checks
// the bytes.
func RunP2P(cfg config.Config, a, b int, n uint64, loss float64) (P2PResult, error) {
	return RunP2PParallel(cfg, 0, a, b, n, loss)
}

// RunP2PParallel is RunP2P on the cluster NewForWorkers builds: the
// classic loop for workers ≤ 0, else partitioned on workers goroutines
// (the same results for every workers ≥ 1).
func RunP2PParallel(cfg config.Config, workers, a, b int, n uint64, loss float64) (P2PResult, error) {
	c, err := NewForWorkers(cfg, workers)
	if err != nil {
		return P2PResult{}, err
	}
	defer c.Close()
	if loss > 0 {
		for _, l := range c.Topo.Links {
			l.Loss = fabric.NewBernoulli(loss, cfg.Seed, l.Name)
		}
	}
	ps, err := c.Connect(a, b)
	if err != nil {
		return P2PResult{}, err
	}
	per := n / uint64(len(ps))
	var trs []*Transfer
	for i, p := range ps {
		src := c.Region(a, per, randomBytes(cfg.Seed+uint64(i)))
		dst := c.Region(b, per, nil)
		tr, err := c.StartTransfer(p, src, dst, per, 1<<20)
		if err != nil {
			return P2PResult{}, err
		}
		trs = append(trs, tr)
	}
	c.RunWhile(func() bool { return !AllDone(trs) })
	r := P2PResult{Bytes: per * uint64(len(ps)), Events: c.Executed(), Verified: cfg.Transport.Payload == config.PayloadReal,
		LineRateBps: float64(c.hostRate()) * float64(c.Topo.Planes)}
	if c.SinglePlane() {
		r.LineRateBps = float64(c.hostRate()) * float64(min(len(ps), c.Topo.Planes))
	}
	for i, tr := range trs {
		if !tr.Done() {
			return r, fmt.Errorf("transfer %d stalled at %v", i, c.Now())
		}
		if len(tr.Errors) > 0 {
			return r, fmt.Errorf("transfer %d: %d work requests failed (%v)", i, len(tr.Errors), tr.Errors[0].Status)
		}
		r.VirtualTime = max(r.VirtualTime, tr.End)
		st := ps[i].A.T.Stats()
		r.DataPackets += st.DataPacketsSent + st.Retransmissions
		r.Retransmitted += st.Retransmissions
		r.Timeouts += st.Timeouts
		if r.Verified {
			for j := range tr.Src.Buf {
				if tr.Src.Buf[j] != tr.Dst.Buf[j] {
					return r, fmt.Errorf("transfer %d: byte %d differs", i, j)
				}
			}
		}
	}
	r.GoodputBps = float64(r.Bytes) * 8 / (float64(r.VirtualTime) / 1e9)
	return r, nil
}

func randomBytes(seed uint64) func([]byte) {
	return func(b []byte) {
		r := sim.NewFastRand(seed, "payload")
		for i := 0; i+8 <= len(b); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8; j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
	}
}
