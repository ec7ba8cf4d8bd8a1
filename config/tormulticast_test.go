package config

import (
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
)

func TestTorMulticastConfig(t *testing.T) {
	def := Default()
	if got := def.Fabric.TorMulticast.Fabric(); got != fabric.DefaultTorMulticast() {
		t.Fatalf("the defaults differ from the fabric's: %+v vs %+v", got, fabric.DefaultTorMulticast())
	}
	if def.Fabric.TorMulticast.Mode != TorMulticastAuto || def.TorMulticastEnabled() {
		t.Fatalf("default mode %q enabled %v: want auto, off for transport %s", def.Fabric.TorMulticast.Mode, def.TorMulticastEnabled(), def.Transport.Kind)
	}
	for _, c := range []struct {
		mode, kind string
		on         bool
	}{
		{TorMulticastAuto, TorMulticastAutoKind, true},
		{TorMulticastAuto, TransportMRC, false},
		{TorMulticastOn, TransportMRC, true},
		{TorMulticastOff, TorMulticastAutoKind, false},
	} {
		cfg := Default()
		cfg.Fabric.TorMulticast.Mode, cfg.Transport.Kind = c.mode, c.kind
		if got := cfg.TorMulticastEnabled(); got != c.on {
			t.Errorf("mode %s, transport %s: enabled %v, want %v", c.mode, c.kind, got, c.on)
		}
	}
	cfg, err := Load("", []string{"fabric.forwarding=ecmp", "fabric.torMulticast.mode=on", "fabric.torMulticast.groups=7",
		"fabric.torMulticast.idleTimeout=3us", "fabric.torMulticast.dedupEntries=9", "fabric.torMulticast.dedupWindow=1s"})
	if err != nil {
		t.Fatal(err)
	}
	want := fabric.TorMulticastConfig{Groups: 7, IdleTimeout: 3 * time.Microsecond, DedupEntries: 9, DedupWindow: time.Second}
	if got := cfg.Fabric.TorMulticast.Fabric(); got != want || !cfg.TorMulticastEnabled() {
		t.Fatalf("loaded %+v (enabled %v), want %+v", got, cfg.TorMulticastEnabled(), want)
	}
}

func TestTorMulticastBadValues(t *testing.T) {
	for _, c := range []struct {
		set  []string
		path string
		want string
	}{
		{[]string{"fabric.torMulticast.mode=yes"}, "fabric.torMulticast.mode", `must be one of "auto", "on", "off"`},
		{[]string{"fabric.torMulticast.groups=0"}, "fabric.torMulticast.groups", "must be 1..1048576"},
		{[]string{"fabric.torMulticast.groups=1048577"}, "fabric.torMulticast.groups", "must be 1..1048576"},
		{[]string{"fabric.torMulticast.idleTimeout=0s"}, "fabric.torMulticast.idleTimeout", "must be 1µs..10s"},
		{[]string{"fabric.torMulticast.idleTimeout=11s"}, "fabric.torMulticast.idleTimeout", "must be 1µs..10s"},
		{[]string{"fabric.torMulticast.idleTimeout=5"}, "fabric.torMulticast.idleTimeout", "has no unit"},
		{[]string{"fabric.torMulticast.dedupEntries=-1"}, "fabric.torMulticast.dedupEntries", "must be 1..1048576"},
		{[]string{"fabric.torMulticast.dedupWindow=999ns"}, "fabric.torMulticast.dedupWindow", "must be 1µs..1s"},
		{[]string{"fabric.torMulticast.dedupWindow=2s"}, "fabric.torMulticast.dedupWindow", "must be 1µs..1s"},
		// On, the copies need path-address routing.
		{[]string{"fabric.forwarding=usid", "fabric.torMulticast.mode=on"}, "fabric.torMulticast.mode", "needs fabric.forwarding ecmp, static or pathquality"},
	} {
		_, err := Load("", c.set)
		if !names(err, c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s: %q", c.set, err, c.path, c.want)
		}
	}
	// auto is on for transport.kind orderre, whose own rule refuses usid
	// naming fabric.forwarding: one error for one mistake, not the mode's too.
	cfg := Default()
	cfg.Transport.Kind = TorMulticastAutoKind
	if err := cfg.Validate(); err == nil || names(err, "fabric.torMulticast.mode") || !strings.Contains(err.Error(), "fabric.forwarding") {
		t.Errorf("auto + orderre + usid: %v, want the fabric.forwarding error only", err)
	}
	for _, ok := range [][]string{
		{"fabric.forwarding=usid", "fabric.torMulticast.mode=off"},
		{"fabric.forwarding=usid"}, // auto, transport mrc: off
		{"fabric.forwarding=static", "fabric.torMulticast.mode=on"},
	} {
		if _, err := Load("", ok); err != nil {
			t.Errorf("%v rejected: %v", ok, err)
		}
	}
}
