package fabric

import (
	"math"

	"github.com/vcluster/vcluster/sim"
)

// GilbertElliott is a two-state bursty loss model: in the Good state a
// packet is lost with probability LossGood, in the Bad state with LossBad;
// after each packet the state flips Good→Bad with probability P and
// Bad→Good with probability R (mean burst length 1/R packets).
type GilbertElliott struct {
	P, R, LossGood, LossBad float64
	bad                     bool
	rng                     sim.FastRand
}

// NewGilbertElliott returns the model with its own stream, starting Good.
func NewGilbertElliott(p, r, lossGood, lossBad float64, seed uint64, name string) *GilbertElliott {
	return &GilbertElliott{P: p, R: r, LossGood: lossGood, LossBad: lossBad, rng: sim.NewFastRand(seed, "ge/"+name)}
}

// Lose implements LossModel.
func (g *GilbertElliott) Lose(*Packet) bool {
	loss := g.LossGood
	if g.bad {
		loss = g.LossBad
	}
	lost := loss > 0 && g.rng.Float64() < loss
	if g.bad {
		g.bad = g.rng.Float64() >= g.R
	} else {
		g.bad = g.rng.Float64() < g.P
	}
	return lost
}

// MeanLoss is the model's long-run loss rate.
func (g *GilbertElliott) MeanLoss() float64 {
	if g.P+g.R == 0 {
		return g.LossGood
	}
	pb := g.P / (g.P + g.R)
	return (1-pb)*g.LossGood + pb*g.LossBad
}

// BitErrors corrupts frames at a bit error rate: a frame of n bytes on the
// wire survives with probability (1-BER)^(8n). A corrupted frame fails its
// FCS and is dropped by the receiving MAC.
type BitErrors struct {
	BER float64
	rng sim.FastRand
}

// NewBitErrors returns a BER corruption model with its own stream.
func NewBitErrors(ber float64, seed uint64, name string) *BitErrors {
	return &BitErrors{BER: ber, rng: sim.NewFastRand(seed, "ber/"+name)}
}

// FrameErrorRate is the probability a frame of n wire bytes is corrupted.
func (b *BitErrors) FrameErrorRate(n int) float64 {
	return -math.Expm1(float64(8*n) * math.Log1p(-b.BER))
}

// Corrupt implements CorruptionModel.
func (b *BitErrors) Corrupt(p *Packet) bool {
	return b.BER > 0 && b.rng.Float64() < b.FrameErrorRate(p.WireLen)
}

// SetDown takes the switch down (a crash or reboot: every cable to it
// goes dark in both directions, frames queued or in flight are lost) or
// brings it back up with its tables as they were.
func (s *Switch) SetDown(down bool) {
	s.down = down
	for _, p := range s.Ports {
		if p.Tx != nil {
			p.Tx.SetUp(!down)
			p.Peer.Tx.SetUp(!down)
		}
		if down {
			p.flush(DropSwitchDown)
		}
	}
}

// Down reports whether the switch is down.
func (s *Switch) Down() bool { return s.down }

// BlackHole makes the switch silently drop fraction (0..1] of the packets
// it would forward whose destination — after its uSID shift in uSID mode —
// starts with the 16-bit uSID sid (uSID mode) or lies in subnet sid (other
// modes). fraction 0 removes the black hole. Drops are counted in
// Counters.BlackHoled (and the ingress port's Counters.BlackHoled), never
// as a port drop reason: to the network they are silent, like the gray
// failures Clustermapper hunts.
func (s *Switch) BlackHole(sid uint16, fraction float64) {
	s.holeSID, s.holeFrac, s.hole = sid, fraction, fraction > 0
	if s.holeRNG == (sim.FastRand{}) {
		s.holeRNG = sim.NewFastRand(s.seed, "blackhole/"+s.Name)
	}
}

// flush drops every frame waiting in the port (not the one on the wire).
func (pt *Port) flush(reason int) {
	if pq := pt.pq; pq != nil {
		for c := range pt.queues {
			for pt.queues[c].n > 0 {
				p := pt.qpop(c)
				if pt.acct != nil {
					pt.acct.release(p)
				}
				pq.qc[c].Drops++
				pt.drop(p, reason)
			}
		}
	}
	for p := pt.ctrlPop(); p != nil; p = pt.ctrlPop() {
		pt.drop(p, reason)
	}
}
