package collectives

import (
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/internal/clustertest"
)

// newCluster builds cluster C (4 planes × 100G) with hosts hosts over the
// transport: MRC on uSID forwarding, RoCE on ECMP.
func newCluster(t testing.TB, transport string, hosts int, sets ...string) *cluster.Cluster {
	t.Helper()
	base := []string{"fabric.preset=C", "fabric.hosts=" + itoa(hosts), "transport.kind=" + transport}
	if transport == "roce" {
		base = append(base, "fabric.forwarding=ecmp")
	}
	return clustertest.New(t, append(base, sets...)...)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func newComm(t testing.TB, c *cluster.Cluster, o Options) *Comm {
	t.Helper()
	m, err := New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func lossEverywhere(c *cluster.Cluster, p float64) {
	for _, l := range c.Topo.Links {
		l.Loss = fabric.NewBernoulli(p, c.Config.Seed, l.Name)
	}
}

func firstHosts(n int) []int {
	h := make([]int, n)
	for i := range h {
		h[i] = i
	}
	return h
}
