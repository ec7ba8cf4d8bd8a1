package roce_test

import (
	"testing"

	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
	"github.com/vcluster/vcluster/verbs/verbstest"
)

// conformance describes RoCE to verbstest through the exported API only.
// RoCE rides the lossless class and is never trimmed: no HeaderLen.
func conformance(name string, cfg roce.Config) verbstest.Transport {
	return verbstest.Transport{
		Name: name,
		New: func(mem *verbs.Memory, qpn uint32, seed uint64) verbs.Transport {
			return roce.New(cfg, mem, qpn, seed)
		},
		IsData:     func(b []byte) bool { return len(b) > 0 && roce.IsWrite(b[0]) },
		MTU:        cfg.PMTU,
		Window:     16,
		ZeroLength: true,
		Planes:     cfg.Plane + 1,
	}
}

func TestConformance(t *testing.T) {
	gbn := roce.DefaultConfig() // go-back-N, DCQCN
	irn := roce.DefaultConfig()
	irn.Reliability = roce.IRN
	for _, tr := range []verbstest.Transport{
		conformance("gbn-dcqcn", gbn),
		conformance("irn-dcqcn", irn),
	} {
		t.Run(tr.Name, func(t *testing.T) { verbstest.RunConformance(t, tr.NewPair) })
	}
}
