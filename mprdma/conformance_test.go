package mprdma_test

import (
	"testing"

	"github.com/vcluster/vcluster/mprdma"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
	"github.com/vcluster/vcluster/verbs/verbstest"
)

// conformance describes one scheme to verbstest through the exported API
// only. RoCEv2 rides the lossless class and is never trimmed: no
// HeaderLen. The first window is InitCwnd packets.
func conformance(name string, cfg mprdma.Config) verbstest.Transport {
	d := cfg.Derived()
	return verbstest.Transport{
		Name: name,
		New: func(mem *verbs.Memory, qpn uint32, seed uint64) verbs.Transport {
			return mprdma.New(cfg, mem, qpn, seed)
		},
		IsData:     func(b []byte) bool { return len(b) > 0 && roce.IsWrite(b[0]) },
		MTU:        cfg.PMTU,
		Window:     d.InitCwnd,
		ZeroLength: true,
		Planes:     cfg.Planes,
	}
}

func TestConformance(t *testing.T) {
	for _, s := range []mprdma.Scheme{mprdma.SchemeMPRDMA, mprdma.SchemeRandom, mprdma.SchemeOrderRE} {
		for _, paths := range []int{1, 4} {
			cfg := mprdma.DefaultConfig()
			cfg.Scheme, cfg.Paths = s, paths
			cfg.PMTU = 1024
			name := s.String()
			if paths > 1 {
				name += "-4paths"
			}
			tr := conformance(name, cfg)
			t.Run(name, func(t *testing.T) { verbstest.RunConformance(t, tr.NewPair) })
		}
	}
}
