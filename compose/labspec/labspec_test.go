package labspec

import (
	"strings"
	"testing"

	"github.com/vcluster/vcluster/config"
)

func TestResolveScalesBothTiers(t *testing.T) {
	l, err := Resolve("", []string{"fabric.preset=C", "fabric.hosts=4"}, 2_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Run.Pacing != config.PacingRealtime {
		t.Fatalf("pacing %q, want realtime", l.Config.Run.Pacing)
	}
	if got := l.Config.Fabric.HostLinkBps(); got != 2e9 {
		t.Fatalf("host links at %d b/s, want 2e9", got)
	}
	s := l.Scaling
	if s.ConfiguredHostBps != 100e9 || s.Factor != 0.02 || s.FabricBps != uint64(float64(s.ConfiguredFabricBps)*0.02) {
		t.Fatalf("scaling %+v", s)
	}
	if l.Config.Fabric.FabricLinkBps() != s.FabricBps {
		t.Fatalf("fabric links at %d, scaling says %d", l.Config.Fabric.FabricLinkBps(), s.FabricBps)
	}
	again, err := Resolve("", []string{"fabric.preset=C", "fabric.hosts=4"}, 2_000_000_000)
	if err != nil || again.Digest != l.Digest {
		t.Fatalf("same inputs, different digest (err %v)", err)
	}
	other, err := Resolve("", []string{"fabric.preset=C", "fabric.hosts=4"}, 1_000_000_000)
	if err != nil || other.Digest == l.Digest {
		t.Fatalf("different scaling, same digest (err %v)", err)
	}
}

func TestResolveRejects(t *testing.T) {
	for _, c := range []struct {
		bps  uint64
		sets []string
		want string
	}{
		{10, nil, "--plane-speed: 10bps is outside 1M..100G"},
		{1e9, []string{"fabric.planes=0"}, "fabric.planes"},
	} {
		_, err := Resolve("", c.sets, c.bps)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%v, %d): %v, want an error containing %q", c.sets, c.bps, err, c.want)
		}
	}
}
