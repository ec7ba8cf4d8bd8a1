package mrc_test

import (
	"testing"

	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/verbs"
	"github.com/vcluster/vcluster/verbs/verbstest"
)

// conformance describes MRC to verbstest through the exported API only.
func conformance(name string, cfg mrc.Config) verbstest.Transport {
	return verbstest.Transport{
		Name: name,
		New: func(mem *verbs.Memory, qpn uint32, seed uint64) verbs.Transport {
			return mrc.New(cfg, mem, qpn, seed)
		},
		IsData: func(b []byte) bool { return len(b) > 0 && mrc.IsDataOpcode(b[0]) },
		HeaderLen: func(b []byte) int {
			var h mrc.DataHeader
			n, err := mrc.DecodeData(b, &h)
			if err != nil {
				return len(b)
			}
			return n
		},
		MTU:        cfg.PMTU,
		Window:     cfg.MPR * 128,
		ZeroLength: true,
		Planes:     cfg.Planes,
	}
}

func TestConformance(t *testing.T) {
	perPacket := mrc.DefaultConfig()
	perPacket.RetryScope = mrc.RetryPacket
	perHole := mrc.DefaultConfig()
	perHole.LossDetection = mrc.LossPerHole
	for _, tr := range []verbstest.Transport{
		conformance("default", mrc.DefaultConfig()),
		conformance("retry-packet", perPacket),
		conformance("loss-per-hole", perHole),
	} {
		t.Run(tr.Name, func(t *testing.T) { verbstest.RunConformance(t, tr.NewPair) })
	}
}
