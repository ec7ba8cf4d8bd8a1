package config

import (
	"strings"
	"testing"
	"time"

	unit "github.com/vcluster/vcluster/units"
)

// Each preset's thresholds at 100G, 400G and 800G, worked by hand from the
// reference's rule (htsim: 10 µs base RTT, 4150 B packets).
func TestECNPresetThresholds(t *testing.T) {
	const rtt, pkt = 10 * time.Microsecond, 4150
	rates := []uint64{100e9, 400e9, 800e9}
	want := map[string][3]ECNThresholds{
		ECNDCQCN:   {{5000, 200000, 0.01}, {5000, 200000, 0.01}, {5000, 200000, 0.01}},
		ECNSeed002: {{100000, 200000, 0.5}, {100000, 200000, 0.5}, {100000, 200000, 0.5}},
		// run.py: 100·bw/25 KB and 400·bw/25 KB.
		ECNHPCC: {{400000, 1600000, 0.2}, {1600000, 6400000, 0.2}, {3200000, 12800000, 0.2}},
		// BDP 125 000 B = 31 packets (rounded up): 0.2 → 7, 0.8 → 25 packets;
		// 500 000 B = 121 → 25, 97; 1 000 000 B = 241 → 49, 193.
		ECNHtsim:  {{7 * pkt, 25 * pkt, 1}, {25 * pkt, 97 * pkt, 1}, {49 * pkt, 193 * pkt, 1}},
		ECNCustom: {{1000, 9000, 0.3}, {1000, 9000, 0.3}, {1000, 9000, 0.3}},
	}
	for _, name := range ECNPresetNames() {
		if name == ECNAuto {
			continue // resolved to one of the others (TestECNAutoFollowsTransport)
		}
		e := ECNConfig{Enabled: true, Preset: name}
		if name == ECNCustom {
			e.KminBytes, e.KmaxBytes, e.Pmax = 1000, 9000, 0.3
		}
		for i, r := range rates {
			if got := e.Thresholds(r, rtt, pkt); got != want[name][i] {
				t.Errorf("%s at %s: %v, want %v", name, unit.FormatSpeed(r), got, want[name][i])
			}
		}
	}
	if got := (ECNConfig{Preset: "dctcp"}).Thresholds(100e9, rtt, pkt); got != (ECNThresholds{}) {
		t.Errorf("unknown preset resolved to %v", got)
	}
}

// How explicit thresholds and presets combine across the layers of Load.
func TestECNPresetLayers(t *testing.T) {
	cases := []struct {
		name, yaml string
		sets       []string
		want       ECNConfig
	}{
		{"default", "", nil, ECNConfig{Enabled: true, Preset: ECNAuto}},
		{"kmin alone means custom from the replaced preset", "", []string{"transport.kind=roce", "fabric.queue.ecn.kminBytes=10000"},
			ECNConfig{Enabled: true, Preset: ECNCustom, KminBytes: 10000, KmaxBytes: 200000, Pmax: 0.01}},
		{"kmin alone over a file's seed002", "fabric: {queue: {ecn: {preset: seed002}}}", []string{"fabric.queue.ecn.kminBytes=10000"},
			ECNConfig{Enabled: true, Preset: ECNCustom, KminBytes: 10000, KmaxBytes: 200000, Pmax: 0.5}},
		{"file thresholds without a preset", "fabric: {queue: {ecn: {kminBytes: 37500, kmaxBytes: 150000, pmax: 0.2}}}", nil,
			ECNConfig{Enabled: true, Preset: ECNCustom, KminBytes: 37500, KmaxBytes: 150000, Pmax: 0.2}},
		{"a named preset clears the file's custom values", "fabric: {queue: {ecn: {preset: custom, kminBytes: 1, kmaxBytes: 2, pmax: 0.2}}}",
			[]string{"fabric.queue.ecn.preset=seed002"}, ECNConfig{Enabled: true, Preset: ECNSeed002}},
		{"a set preset with the file's kmin", "fabric: {queue: {ecn: {preset: custom, kminBytes: 1, kmaxBytes: 2, pmax: 0.2}}}",
			[]string{"fabric.queue.ecn.kmaxBytes=3"}, ECNConfig{Enabled: true, Preset: ECNCustom, KminBytes: 1, KmaxBytes: 3, Pmax: 0.2}},
		{"hpcc with a buffer for it", "", []string{"fabric.queue.ecn.preset=hpcc", "fabric.queue.bufferBytes=1600000"},
			ECNConfig{Enabled: true, Preset: ECNHPCC}},
	}
	for _, tc := range cases {
		path := ""
		if tc.yaml != "" {
			path = writeYAML(t, tc.yaml)
		}
		c, err := Load(path, tc.sets)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.Fabric.Queue.ECN != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, c.Fabric.Queue.ECN, tc.want)
		}
		// The resolved config reads back the same (experiments round-trip
		// configs through YAML and add --set on top).
		y, err := c.YAML()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Load(writeYAML(t, string(y)), nil)
		if err != nil || back.Fabric.Queue.ECN != tc.want {
			t.Errorf("%s: round trip gave %+v, %v", tc.name, back.Fabric.Queue.ECN, err)
		}
	}
}

// Preset auto is each transport's reference: htsim's thresholds for MRC,
// the DCQCN paper's for RoCE; the switches and Validate see the resolved
// preset, the config keeps "auto" (experiments switch transports on one
// config).
func TestECNAutoFollowsTransport(t *testing.T) {
	for kind, want := range map[string]string{TransportMRC: ECNHtsim, TransportRoCE: ECNDCQCN} {
		c, err := Load("", []string{"transport.kind=" + kind})
		if err != nil {
			t.Fatal(err)
		}
		if c.Fabric.Queue.ECN.Preset != ECNAuto {
			t.Errorf("%s: preset %q, want auto kept in the config", kind, c.Fabric.Queue.ECN.Preset)
		}
		if got := c.EffectiveECN().Preset; got != want {
			t.Errorf("%s: auto resolved to %q, want %q", kind, got, want)
		}
	}
	if _, err := Load("", []string{"fabric.queue.ecn.kminBytes=10000"}); err == nil || !strings.Contains(err.Error(), "fabric.queue.ecn.kmaxBytes") {
		t.Errorf("MRC, kmin alone over auto (htsim, rate-scaled): %v, want kmaxBytes asked for", err)
	}
}
