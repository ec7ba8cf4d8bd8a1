package config

import (
	"strings"
	"testing"
)

// The capture fields' bounds, at and past each limit.
func TestPcapFieldsRange(t *testing.T) {
	for _, ok := range [][]string{
		{"output.pcapFormat=pcap"}, {"output.pcapFormat=pcapng"},
		{"output.pcapMaxPackets=1"}, {"output.pcapMaxPackets=100000000"},
		{"output.pcapSnaplen=0"}, {"output.pcapSnaplen=64"}, {"output.pcapSnaplen=65535"},
	} {
		if _, err := Load("", ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for set, want := range map[string]string{
		"output.pcapFormat=PCAP":           `output.pcapFormat: must be one of "pcapng", "pcap", got "PCAP"`,
		"output.pcapMaxPackets=0":          "output.pcapMaxPackets: must be 1..100000000, got 0",
		"output.pcapMaxPackets=1000000000": "output.pcapMaxPackets: must be 1..100000000, got 1000000000",
		"output.pcapSnaplen=10":            "output.pcapSnaplen: must be 0 (whole frames) or 64..65535, got 10",
		"output.pcapSnaplen=70000":         "output.pcapSnaplen: must be 0 (whole frames) or 64..65535, got 70000",
	} {
		_, err := Load("", []string{set})
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", set, err, want)
		}
	}
}

// Unknown port names are refused up front with the ranges of the kind of
// name they look like, or of every kind; the fabric's exact names (and
// only those: see cluster's TestCapturePortsMatchTopology) pass.
func TestCheckCapturePortsMessages(t *testing.T) {
	fat := []string{"fabric.topology=fattree", "fabric.k=4"}
	big := []string{"fabric.hosts=64"} // 4 planes, 16 T0 of 4 hosts, 4 T1
	for _, c := range []struct {
		sets []string
		name string
		want string // "" accepted
	}{
		{big, "h63/p3", ""},
		{big, "h99/p0", `output.pcap: no port named "h99/p0": hosts are h0..h63, planes p0..p3`},
		{big, "h0/p4", `output.pcap: no port named "h0/p4": hosts are h0..h63, planes p0..p3`},
		{big, "p3.t0.15/7", ""},
		{big, "p3.t0.15/8", `output.pcap: no port named "p3.t0.15/8": T0 switch ports are p<0..3>.t0.<0..15>/<0..7>`},
		{big, "p0.t1.3/15", ""},
		{big, "p0.t1.4/0", `output.pcap: no port named "p0.t1.4/0": T1 switch ports are p<0..3>.t1.<0..3>/<0..15>`},
		{big, "h01/p0", "hosts are h0..h63, planes p0..p3; T0 switch ports are"},
		{big, "h-1/p0", "no port named"},
		{big, "edge.0.0/0", "T1 switch ports are p<0..3>.t1.<0..3>/<0..15>"},
		{fat, "h15/p0", ""},
		{fat, "h16/p0", `output.pcap: no port named "h16/p0": hosts are h0..h15, plane p0`},
		{fat, "edge.3.1/3", ""},
		{fat, "agg.3.1/3", ""},
		{fat, "core.3/3", ""},
		{fat, "core.4/0", `output.pcap: no port named "core.4/0": core switch ports are core.<0..3>/<0..3>`},
		{fat, "agg.0.2/0", `output.pcap: no port named "agg.0.2/0": aggregation switch ports are agg.<0..3>.<0..1>/<0..3>`},
		{fat, "p0.t0.0/0", "edge switch ports are edge.<0..3>.<0..1>/<0..3>; aggregation switch"},
		{fat, "h99999999999/p0", "no port named"},
	} {
		_, err := Load("", append(c.sets, "output.pcap="+c.name))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v %q: %v", c.sets, c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v %q: %v, want %q", c.sets, c.name, err, c.want)
		}
	}
	// The exported check, on its own, agrees; an invalid fabric is said
	// to be one.
	// (--set trims spaces and drops empty items; a YAML list keeps them.)
	c := Default()
	c.Output.Pcap = []string{"h0/p0", "h16/p0", "h0/p0", "h1/p0 ", ""}
	err := CheckCapturePorts(c)
	for _, want := range []string{`no port named "h16/p0"`, `lists port "h0/p0" twice`, `no port named "h1/p0 "`, `no port named ""`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckCapturePorts = %v, want %q", err, want)
		}
	}
	if err != nil && strings.Count(err.Error(), "output.pcap:") != 4 {
		t.Errorf("CheckCapturePorts = %v: want 4 errors", err)
	}
	c.Fabric.T1PerPlane = 0
	if err := CheckCapturePorts(c); err == nil || !strings.Contains(err.Error(), "the fabric fields are invalid") {
		t.Errorf("on an invalid fabric: %v", err)
	}
}
