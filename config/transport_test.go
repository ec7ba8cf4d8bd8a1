package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/mprdma"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/roce"
)

// withKind registers kind for the test only.
func withKind(t *testing.T, kind string) {
	n := len(registeredKinds)
	RegisterTransportKind(kind)
	t.Cleanup(func() { registeredKinds = registeredKinds[:n] })
}

// config knows the kinds of its sections without anyone registering them,
// and a registered kind (what cluster.RegisterTransport does) is valid
// with no change here; an unknown one is refused listing them all.
func TestTransportKinds(t *testing.T) {
	sections := []string{TransportMRC, TransportRoCE, TransportMPRDMA, TransportRandom, TransportOrderRE}
	if got := TransportKinds(); !slices.Equal(got, sections) {
		t.Fatalf("TransportKinds() = %v, want the sections' %v (transport.mprdma's shared kinds once each)", got, sections)
	}
	withKind(t, "mprdma-test")
	withKind(t, TransportRoCE)   // known already: nothing changes
	withKind(t, TransportRandom) // known by its shared section
	if got := TransportKinds(); !slices.Equal(got, append(slices.Clone(sections), "mprdma-test")) {
		t.Fatalf("TransportKinds() = %v", got)
	}
	if _, err := Load("", []string{"transport.kind=mprdma-test"}); err != nil {
		t.Fatalf("registered kind refused: %v", err)
	}
	_, err := Load("", []string{"transport.kind=bogus"})
	fes := fieldErrors(t, err)
	want := `transport.kind: must be one of "mrc", "roce", "mprdma", "random", "orderre", "mprdma-test", got "bogus"`
	if len(fes) != 1 || err.Error() != want {
		t.Fatalf("transport.kind=bogus: %v, want %s", err, want)
	}
}

// Every section is checked whichever kind runs, and the selected kind's
// section against the fabric: MRC's packet must fit fabric.mtu only when
// MRC runs.
func TestSectionsChecked(t *testing.T) {
	for _, kind := range []string{TransportMRC, TransportRoCE} {
		_, err := Load("", []string{"transport.kind=" + kind, "transport.mrc.evsPerQP=1", "transport.roce.retryCount=9"})
		msg := err.Error()
		for _, s := range []string{"transport.mrc.evsPerQP: must be 128..256, got 1", "transport.roce.retryCount: must be 0..7, got 9"} {
			if !strings.Contains(msg, s) {
				t.Errorf("kind %s: %q does not say %q", kind, msg, s)
			}
		}
	}
	fit := []string{"fabric.mtu=1500", "transport.mrc.pmtu=4096"}
	if _, err := Load("", append(fit, "transport.kind=roce")); err != nil {
		t.Errorf("RoCE with MRC's pmtu beyond the MTU: %v", err)
	}
	_, err := Load("", append(fit, "transport.kind=mrc"))
	if want := "transport.mrc.pmtu: must be ≤ fabric.mtu − 88 (1412): a full MRC packet must fit the MTU, got 4096"; err == nil || err.Error() != want {
		t.Errorf("MRC's pmtu beyond the MTU: %v, want %s", err, want)
	}
}

// The transports' vocabulary config repeats is theirs.
func TestTransportVocabularyInStep(t *testing.T) {
	if MRCPacketOverhead != 88 || MinPMTU != 256 || MaxPMTU != 4096 {
		t.Errorf("MRC: overhead %d, PMTU %d..%d, want 88, 256..4096", MRCPacketOverhead, MinPMTU, MaxPMTU)
	}
	if bounds := []time.Duration{MaxTimeout, mrc.MaxRTO, roce.MaxTimeout, mprdma.MaxRTO}; slices.Max(bounds) != slices.Min(bounds) {
		t.Errorf("MaxTimeout, mrc.MaxRTO, roce.MaxTimeout, mprdma.MaxRTO: %v, want one bound", bounds)
	}
	if !slices.Equal(RoCECCPresets, roce.Presets()) || len(RoCERenamedCCPresets) != len(roce.RenamedPresets()) {
		t.Error("RoCE presets differ from package roce's")
	}
	var s mrc.Settings
	s.SetDefaults()
	if d := Default().Transport.MRC; d != s {
		t.Errorf("default MRC section %+v, want mrc's %+v", d, s)
	}
}
