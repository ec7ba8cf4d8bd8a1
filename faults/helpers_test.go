package faults

import (
	"testing"

	"github.com/vcluster/vcluster/config"
)

func load(t testing.TB, sets ...string) config.Config {
	t.Helper()
	c, err := config.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mrcC is paper cluster C scaled: 4 × 100G planes, 16 hosts, uSID, MRC.
func mrcC(t testing.TB, sets ...string) config.Config {
	return load(t, append([]string{"fabric.preset=C", "fabric.hosts=16", "transport.kind=mrc"}, sets...)...)
}

func mustPlan(t testing.TB, y string) *Plan {
	t.Helper()
	p, err := ParsePlan("test.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
