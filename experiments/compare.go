package experiments

import (
	"fmt"
	"os"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// Variant is one transport setup of a comparison, as config overrides.
type Variant struct {
	Name string
	Sets []string
}

// DefaultVariants are the setups `vcluster run` compares: MRC with one QP
// over every plane (uSID paths), and RoCEv2 (go-back-N, DCQCN, ECMP) with
// one QP and with eight spread over the planes.
var DefaultVariants = []Variant{
	{"MRC, 1 QP", []string{"transport.kind=mrc"}},
	{"RoCE, 1 QP", []string{"transport.kind=roce", "fabric.forwarding=ecmp", "transport.qpsPerConnection=1"}},
	{"RoCE, 8 QPs", []string{"transport.kind=roce", "fabric.forwarding=ecmp", "transport.qpsPerConnection=8"}},
}

// Row is one measured cell of the comparison.
type Row struct {
	Variant  string
	Loss     float64
	Result   cluster.P2PResult
	Fraction float64 // goodput over the host's whole NIC capacity (all planes)
	Err      error
}

// Compare moves n bytes from the first host to the last one for every
// variant at every loss rate (Bernoulli, on every link), starting from
// base (a resolved config) with each variant's overrides applied, and
// returns the rows in order. A failed run is reported in its row, not as
// an error: a transport that breaks under loss is a result.
func Compare(base config.Config, variants []Variant, losses []float64, n uint64) ([]Row, error) {
	var rows []Row
	for _, v := range variants {
		cfg, err := override(base, v.Sets)
		if err != nil {
			return nil, fmt.Errorf("variant %q: %w", v.Name, err)
		}
		for _, loss := range losses {
			r, err := cluster.RunP2P(cfg, 0, cfg.Fabric.Hosts-1, n, loss)
			capacity := float64(r.LineRateBps)
			if cfg.Transport.Kind == config.TransportRoCE {
				// RoCE's line rate in P2PResult is what its QPs can reach;
				// the comparison is against the whole NIC.
				capacity = capacity / float64(min(cfg.Transport.QPsPerConnection, cfg.Fabric.Planes)) * float64(cfg.Fabric.Planes)
			}
			rows = append(rows, Row{Variant: v.Name, Loss: loss, Result: r, Fraction: r.GoodputBps / capacity, Err: err})
		}
	}
	return rows, nil
}

// override applies --set style overrides to a resolved config by
// round-tripping it through its YAML (config.Load reads files).
func override(base config.Config, sets []string) (config.Config, error) {
	y, err := base.YAML()
	if err != nil {
		return config.Config{}, err
	}
	f, err := os.CreateTemp("", "vcluster-*.yaml")
	if err != nil {
		return config.Config{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(y); err != nil {
		f.Close()
		return config.Config{}, err
	}
	if err := f.Close(); err != nil {
		return config.Config{}, err
	}
	return config.Load(f.Name(), sets)
}
