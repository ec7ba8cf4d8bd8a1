package fabric

import (
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// TestForwardingRegistry: every mode is registered under its config word,
// the words round-trip, and the values the config and the CLI rely on do
// not move (ForwardECMP is the zero mode).
func TestForwardingRegistry(t *testing.T) {
	want := []struct {
		m    ForwardingMode
		name string
	}{{ForwardECMP, ForwardECMPName}, {ForwardUSID, ForwardUSIDName}, {ForwardStatic, ForwardStaticName}, {ForwardPathQuality, ForwardPathQualityName}}
	if got := ForwardingModes(); len(got) != len(want) {
		t.Fatalf("registered modes %v, want %d", got, len(want))
	}
	for i, w := range want {
		if int(w.m) != i || w.m.String() != w.name || !w.m.Valid() {
			t.Errorf("mode %d: %q valid %v, want %d %q", w.m, w.m, w.m.Valid(), i, w.name)
		}
		if m, ok := ParseForwardingMode(w.name); !ok || m != w.m {
			t.Errorf("ParseForwardingMode(%q) = %v, %v", w.name, m, ok)
		}
	}
	if _, ok := ParseForwardingMode("wcmp"); ok {
		t.Error("an unregistered word parsed")
	}
	bad := ForwardingMode(maxModes - 1)
	if bad.Valid() || bad.String() != "ForwardingMode(15)" {
		t.Errorf("unregistered mode: valid %v, %q", bad.Valid(), bad)
	}
	if _, err := BuildClos(sim.NewLoop(sim.Options{Seed: 1}), ClosSpec{Planes: 1, HostsPerT0: 1, T0: 1, T1: 1, HostRate: 1e9, FabricRate: 1e9}, DefaultOptions(bad)); err == nil {
		t.Error("BuildClos took an unregistered mode")
	}
	if _, err := BuildFatTree(sim.NewLoop(sim.Options{Seed: 1}), FatTreeSpec{K: 4, Rate: 1e9}, DefaultOptions(bad)); err == nil {
		t.Error("BuildFatTree took an unregistered mode")
	}
}

// TestWatchdogActionNames: the actions' config words round-trip.
func TestWatchdogActionNames(t *testing.T) {
	for a, n := range map[WatchdogAction]string{WatchdogDrop: WatchdogDropName, WatchdogForward: WatchdogForwardName, WatchdogAlert: WatchdogAlertName} {
		if a.String() != n {
			t.Errorf("%d: %q, want %q", int(a), a, n)
		}
		if got, ok := ParseWatchdogAction(n); !ok || got != a {
			t.Errorf("ParseWatchdogAction(%q) = %v, %v", n, got, ok)
		}
	}
	if _, ok := ParseWatchdogAction("ignore"); ok {
		t.Error("an unknown action parsed")
	}
}
