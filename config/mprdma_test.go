package config

import (
	"strings"
	"testing"

	"github.com/vcluster/vcluster/mprdma"
)

// The mprdma kinds' sections default to package mprdma's values, and a
// leaf-spine with ECMP or static forwarding takes each kind as it is.
func TestMPRDMASectionsDefault(t *testing.T) {
	var s mprdma.Settings
	s.SetDefaults()
	var o mprdma.OrderRESettings
	o.SetDefaults()
	d := Default().Transport
	if d.MPRDMA != s || d.OrderRE != o {
		t.Errorf("default sections %+v, %+v; want mprdma's %+v, %+v", d.MPRDMA, d.OrderRE, s, o)
	}
	if s.BitmapEntries != 64 || s.RetryCount != 7 || s.Paths != 0 {
		t.Errorf("mprdma defaults %+v: want MP-RDMA's 64-entry bitmap, 7 retries, every path", s)
	}
	for _, kind := range []string{TransportMPRDMA, TransportRandom, TransportOrderRE} {
		for _, fwd := range []string{ForwardingECMP, ForwardingStatic} {
			if _, err := Load("", []string{"transport.kind=" + kind, "fabric.forwarding=" + fwd}); err != nil {
				t.Errorf("kind %s, forwarding %s: %v", kind, fwd, err)
			}
		}
	}
}

// Path addresses are routed only by ECMP and static forwarding: under uSID
// each mprdma kind is refused naming fabric.forwarding, the kind and what
// is allowed; the other kinds are not affected.
func TestMPRDMANeedsECMPOrStatic(t *testing.T) {
	for _, kind := range []string{TransportMPRDMA, TransportRandom, TransportOrderRE} {
		_, err := Load("", []string{"transport.kind=" + kind, "fabric.forwarding=usid"})
		fes := fieldErrors(t, err)
		if len(fes) != 1 || fes[0].Path != "fabric.forwarding" {
			t.Errorf("kind %s under usid: %v, want one fabric.forwarding error", kind, err)
			continue
		}
		for _, s := range []string{`"ecmp"`, `"static"`, "transport.kind " + kind, `got "usid"`} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("kind %s under usid: %q lacks %q", kind, err, s)
			}
		}
	}
	if _, err := Load("", []string{"transport.kind=mrc", "fabric.forwarding=usid"}); err != nil {
		t.Errorf("mrc under usid: %v", err)
	}
}

// transport.mprdma.paths is bounded by the paths the fabric offers
// (planes × t1PerPlane in a Clos, k/2 in a fat-tree) and by 64; 0 takes
// them all.
func TestMPRDMAPathsBoundedByFabric(t *testing.T) {
	clos := []string{"fabric.forwarding=ecmp", "fabric.planes=1", "fabric.t1PerPlane=4", "transport.kind=orderre"}
	for _, ok := range []string{"0", "1", "4"} {
		if _, err := Load("", append(clos, "transport.mprdma.paths="+ok)); err != nil {
			t.Errorf("paths=%s on 1 plane × 4 T1: %v", ok, err)
		}
	}
	_, err := Load("", append(clos, "transport.mprdma.paths=5"))
	want := "transport.mprdma.paths: must be 0 (every path) or 1..4: the fabric offers 4 paths (planes × t1PerPlane = 1 × 4), got 5"
	if err == nil || err.Error() != want {
		t.Errorf("paths=5 on 1 × 4: %v, want %s", err, want)
	}
	// The same number is fine while another kind runs (the section is
	// still range-checked: 65 is refused whatever the kind).
	if _, err := Load("", []string{"transport.kind=mrc", "transport.mprdma.paths=5", "fabric.planes=1", "fabric.t1PerPlane=4"}); err != nil {
		t.Errorf("paths=5 with kind mrc: %v", err)
	}
	_, err = Load("", []string{"transport.kind=mrc", "transport.mprdma.paths=65"})
	if fes := fieldErrors(t, err); len(fes) != 1 || fes[0].Path != "transport.mprdma.paths" || !strings.Contains(err.Error(), "1..64") {
		t.Errorf("paths=65: %v", err)
	}
	ft := []string{"fabric.topology=fattree", "fabric.k=4", "fabric.forwarding=static", "transport.kind=mprdma"}
	if _, err := Load("", append(ft, "transport.mprdma.paths=2")); err != nil {
		t.Errorf("fat-tree k=4, paths=2: %v", err)
	}
	_, err = Load("", append(ft, "transport.mprdma.paths=3"))
	if err == nil || !strings.Contains(err.Error(), "transport.mprdma.paths: must be 0 (every path) or 1..2: the fabric offers 2 paths (k/2 = 4/2)") {
		t.Errorf("fat-tree k=4, paths=3: %v", err)
	}
	for _, c := range []struct {
		f    FabricConfig
		want int
	}{
		{FabricConfig{Topology: TopologyClos, Planes: 4, T1PerPlane: 8}, 32},
		{FabricConfig{Topology: TopologyFatTree, K: 8}, 4},
		{FabricConfig{Topology: "ring"}, 0},
	} {
		if got := c.f.OfferedPaths(); got != c.want {
			t.Errorf("%+v: OfferedPaths %d, want %d", c.f, got, c.want)
		}
	}
}

// Every field of both sections is range-checked with its path and range
// named, whichever kind is selected.
func TestMPRDMASectionRanges(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"transport.mprdma.bitmapEntries=0", "transport.mprdma.bitmapEntries: must be 1..65536, got 0"},
		{"transport.mprdma.bitmapEntries=65537", "transport.mprdma.bitmapEntries: must be 1..65536, got 65537"},
		{"transport.mprdma.retryCount=0", "transport.mprdma.retryCount: must be 1..7, got 0"},
		{"transport.mprdma.retryCount=8", "transport.mprdma.retryCount: must be 1..7, got 8"},
		{"transport.mprdma.rto=0s", "transport.mprdma.rto: must be > 0"},
		{"transport.mprdma.rto=2s", "transport.mprdma.rto: must be"},
		{"transport.mprdma.lossThreshold=-1", "transport.mprdma.lossThreshold: must be 0 or 1..65536, got -1"},
		{"transport.mprdma.initCwnd=-1", "transport.mprdma.initCwnd: must be 0 or 1..65536, got -1"},
		{"transport.mprdma.maxCwnd=70000", "transport.mprdma.maxCwnd: must be 0 or 1..65536, got 70000"},
		{"transport.orderre.lFast=-2", "transport.orderre.lFast: must be 0 or 1..65536, got -2"},
		{"transport.orderre.delta=-1", "transport.orderre.delta: must be 0 or 1..65536, got -1"},
		{"transport.orderre.oMax=65537", "transport.orderre.oMax: must be 0 or 1..65536, got 65537"},
		{"transport.orderre.copies=16", "transport.orderre.copies: must be 0 or 1..15, got 16"},
		{"transport.orderre.repairTimeout=5", "transport.orderre.repairTimeout"},
	} {
		for _, kind := range []string{TransportMRC, TransportOrderRE} {
			_, err := Load("", []string{"transport.kind=" + kind, "fabric.forwarding=ecmp", c.set})
			if err == nil {
				t.Errorf("kind %s, %s accepted", kind, c.set)
				continue
			}
			if fes := fieldErrors(t, err); len(fes) != 1 || !strings.Contains(err.Error(), c.want) {
				t.Errorf("kind %s, %s: %v, want one error with %q", kind, c.set, err, c.want)
			}
		}
	}
	_, err := Load("", []string{"transport.mprdma.initCwnd=64", "transport.mprdma.maxCwnd=32"})
	if want := "transport.mprdma.maxCwnd: must be ≥ transport.mprdma.initCwnd (64), got 32"; err == nil || err.Error() != want {
		t.Errorf("maxCwnd < initCwnd: %v, want %s", err, want)
	}
	if _, err := Load("", []string{"transport.mprdma.initCwnd=32", "transport.mprdma.maxCwnd=32", "transport.mprdma.rto=50us", "transport.orderre.repairTimeout=200us"}); err != nil {
		t.Errorf("valid windows and times: %v", err)
	}
}

// ECN preset auto resolves to htsim for the mprdma kinds (see ECNAuto).
func TestMPRDMAECNAuto(t *testing.T) {
	for _, kind := range []string{TransportMPRDMA, TransportRandom, TransportOrderRE} {
		if got := ECNPresetFor(ECNAuto, kind); got != ECNHtsim {
			t.Errorf("auto for %s = %s, want %s", kind, got, ECNHtsim)
		}
	}
	if got := ECNPresetFor(ECNAuto, TransportRoCE); got != ECNDCQCN {
		t.Errorf("auto for roce = %s", got)
	}
}
