package config

import (
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/pathquality"
)

// The section's defaults are pathquality's (the derived references left
// 0 on both sides).
func TestPathQualityDefaults(t *testing.T) {
	got := Default().PathQuality()
	want := pathquality.Config{}.WithDefaults()
	want.QueueRefBytes, want.DelayRef, want.Apply = got.QueueRefBytes, got.DelayRef, false
	if got != want {
		t.Fatalf("config's defaults\n %+v\ndiffer from pathquality's\n %+v", got, want)
	}
	if got.QueueRefBytes != 0 || got.DelayRef != 0 {
		t.Fatalf("the derived references are not 0 (derive): %+v", got)
	}
	if Default().PathQualityEnabled() {
		t.Fatal("on by default under forwarding usid")
	}
}

func TestPathQualityEnabled(t *testing.T) {
	for _, c := range []struct {
		mode, fwd string
		on        bool
	}{
		{PathQualityAuto, ForwardingPathQuality, true},
		{PathQualityAuto, ForwardingECMP, false},
		{PathQualityAuto, ForwardingUSID, false},
		{PathQualityOn, ForwardingECMP, true},
		{PathQualityOn, ForwardingUSID, true},
		{PathQualityOff, ForwardingECMP, false},
	} {
		cfg := Default()
		cfg.Fabric.PathQuality.Mode, cfg.Fabric.Forwarding = c.mode, c.fwd
		if got := cfg.PathQualityEnabled(); got != c.on {
			t.Errorf("mode %s, forwarding %s: enabled %v, want %v", c.mode, c.fwd, got, c.on)
		}
		if got := cfg.PathQuality().Apply; got != (c.fwd == ForwardingPathQuality) {
			t.Errorf("mode %s, forwarding %s: Apply %v", c.mode, c.fwd, got)
		}
	}
}

// Every key reaches pathquality.Config.
func TestPathQualityLoad(t *testing.T) {
	p := "fabric.pathQuality."
	cfg, err := Load("", []string{"fabric.forwarding=pathquality", p + "samplePeriod=100us", p + "advertisePeriod=300us",
		p + "weights.bandwidth=2", p + "weights.queue=1", p + "weights.delay=0.5", p + "queueRefBytes=5000", p + "delayRef=40us",
		p + "damping.fraction=0.2", p + "damping.minGbps=3", p + "controlDelay=7us",
		p + "hdc.rdmaThreshold=2us", p + "hdc.otherThreshold=20us", p + "hdc.snapLen=64", p + "hdc.maxRecords=9"})
	if err != nil {
		t.Fatal(err)
	}
	want := pathquality.Config{SamplePeriod: 100 * time.Microsecond, AdvertisePeriod: 300 * time.Microsecond,
		Weights: pathquality.Weights{Bandwidth: 2, Queue: 1, Delay: 0.5}, QueueRefBytes: 5000, DelayRef: 40 * time.Microsecond,
		DampingFraction: 0.2, DampingMinGbps: 3, ControlDelay: 7 * time.Microsecond,
		HDC:   fabric.HDCConfig{RDMAThreshold: 2 * time.Microsecond, OtherThreshold: 20 * time.Microsecond, SnapLen: 64, MaxRecords: 9},
		Apply: true}
	if got := cfg.PathQuality(); got != want || !cfg.PathQualityEnabled() {
		t.Fatalf("loaded %+v (enabled %v), want %+v", got, cfg.PathQualityEnabled(), want)
	}
}

// Every key out of range is refused naming it, with pathquality's range;
// so are a duration without a unit, an unknown mode and mode off under
// forwarding pathquality.
func TestPathQualityBadValues(t *testing.T) {
	on := []string{"fabric.forwarding=pathquality"}
	for _, pr := range pathQualityProbes {
		path := pathQualityPrefix + pr.key
		bad := "-1"
		if isDurationKey(pr.key) {
			bad = "-1s"
		}
		err := loadErr(append(on, path+"="+bad))
		if !names(err, path) {
			t.Errorf("%s=%s: not refused naming %s: %v", path, bad, path, err)
			continue
		}
		r := pathQualityRanges()[path]
		if pr.key == "advertisePeriod" && strings.HasPrefix(r, "samplePeriod..") {
			r = strings.TrimPrefix(r, "samplePeriod") // the message has samplePeriod's value
		}
		if r == "" || !strings.Contains(err.Error(), r) {
			t.Errorf("%s=%s: %v: does not state the range %q", path, bad, err, r)
		}
		if isDurationKey(pr.key) {
			if err := loadErr(append(on, path+"=5")); !names(err, path) || !strings.Contains(err.Error(), "no unit") {
				t.Errorf("%s=5: %v, want an error naming it for its missing unit", path, err)
			}
		}
	}
	for _, c := range []struct {
		set  []string
		path string
		want string
	}{
		{[]string{"fabric.pathQuality.mode=sometimes"}, "fabric.pathQuality.mode", `must be one of "auto", "on", "off"`},
		{[]string{"fabric.forwarding=pathquality", "fabric.pathQuality.mode=off"}, "fabric.pathQuality.mode", "without path weights"},
		{[]string{"fabric.pathQuality.mode=on", "fabric.pathQuality.advertisePeriod=1ms", "fabric.pathQuality.samplePeriod=2ms"}, "fabric.pathQuality.advertisePeriod", ""},
	} {
		err := loadErr(c.set)
		if !names(err, c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s: %q", c.set, err, c.path, c.want)
		}
	}
	// Off, nothing but the mode and the syntax is checked.
	if err := loadErr([]string{"fabric.forwarding=ecmp", "fabric.pathQuality.samplePeriod=-1s"}); err != nil {
		t.Errorf("samplePeriod=-1s with the control plane off: %v", err)
	}
}

func isDurationKey(key string) bool {
	switch key {
	case "samplePeriod", "advertisePeriod", "delayRef", "controlDelay", "hdc.rdmaThreshold", "hdc.otherThreshold":
		return true
	}
	return false
}

// Every transport kind that runs under ecmp runs under pathquality, and
// ecmpReconvergence applies to it.
func TestPathQualityForwardingKinds(t *testing.T) {
	for _, kind := range []string{TransportRoCE, TransportMRC, TransportMPRDMA, TransportRandom, TransportOrderRE} {
		for _, fwd := range []string{ForwardingECMP, ForwardingPathQuality} {
			if err := loadErr([]string{"fabric.forwarding=" + fwd, "transport.kind=" + kind, "fabric.ecmpReconvergence=1ms"}); err != nil {
				t.Errorf("transport %s, forwarding %s: %v", kind, fwd, err)
			}
		}
	}
	err := loadErr([]string{"fabric.forwarding=usid", "transport.kind=mprdma"})
	if !names(err, "fabric.forwarding") || !strings.Contains(err.Error(), `"pathquality"`) {
		t.Errorf("mprdma under usid: %v, want fabric.forwarding refused listing pathquality", err)
	}
}
