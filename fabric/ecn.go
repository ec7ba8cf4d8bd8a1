package fabric

import "slices"

// The DCQCN paper's (SIGCOMM 2015) RED thresholds, the default of every
// port: 5 KB / 200 KB / 1 % (TARGETS T10).
const (
	DefaultECNKmin = 5_000
	DefaultECNKmax = 200_000
	DefaultECNPmax = 0.01
)

// SetECNByRate gives every switch port that marks the thresholds ecn
// returns for the rate of its link: references such as HPCC scale Kmin and
// Kmax with the port's rate, so the ports of one role (one PortConfig)
// that run at different rates need different values. Ports of one config
// and rate share one copy. Call it after the topology is built and before
// traffic flows.
func (t *Topology) SetECNByRate(ecn func(rateBps uint64) ECNConfig) {
	type key struct {
		cfg  *PortConfig
		rate uint64
	}
	scaled := map[key]*PortConfig{}
	for _, s := range t.Switches {
		for _, p := range s.Ports {
			if p.Tx == nil || !p.cfg.ECN.Enabled {
				continue
			}
			k := key{p.cfg, p.Tx.Rate}
			c := scaled[k]
			if c == nil {
				cp := *p.cfg
				cp.ECN = ecn(p.Tx.Rate)
				cp.ECN.Enabled = true
				c = &cp
				scaled[k] = c
			}
			p.cfg = c
		}
	}
}

// PortECN is the marking of a set of switch ports: those facing hosts or
// not, at one link rate.
type PortECN struct {
	HostFacing bool
	RateBps    uint64
	ECN        ECNConfig // Enabled false: these ports do not mark
	Ports      int
}

// ECNByRate lists the marking the switch ports use, one entry per
// (host-facing or not, link rate, thresholds), fabric-facing first, then
// by rate.
func (t *Topology) ECNByRate() []PortECN {
	var out []PortECN
	for _, s := range t.Switches {
		for _, p := range s.Ports {
			if p.Tx == nil {
				continue
			}
			e := PortECN{HostFacing: p.HostFacing, RateBps: p.Tx.Rate, ECN: p.cfg.ECN}
			if !e.ECN.Enabled {
				e.ECN = ECNConfig{}
			}
			i := slices.IndexFunc(out, func(o PortECN) bool {
				return o.HostFacing == e.HostFacing && o.RateBps == e.RateBps && o.ECN == e.ECN
			})
			if i < 0 {
				out = append(out, e)
				i = len(out) - 1
			}
			out[i].Ports++
		}
	}
	slices.SortStableFunc(out, func(a, b PortECN) int {
		switch {
		case a.HostFacing != b.HostFacing:
			if a.HostFacing {
				return 1
			}
			return -1
		case a.RateBps < b.RateBps:
			return -1
		case a.RateBps > b.RateBps:
			return 1
		}
		return 0
	})
	return out
}
