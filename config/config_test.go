package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	unit "github.com/vcluster/vcluster/units"
)

// writeYAML writes content to a temporary config file and returns its path.
func writeYAML(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vcluster.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fieldErrors flattens a (joined) error into its *FieldError leaves;
// anything else fails the test.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Errorf("error %q is not a *FieldError", e)
			return
		}
		out = append(out, fe)
	}
	walk(err)
	return out
}

func TestDefaultValidates(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	f := c.Fabric
	checks := []struct {
		name      string
		got, want any
	}{
		{"seed", c.Seed, uint64(1)},
		{"topology", f.Topology, "clos"},
		{"preset", f.Preset, ""},
		{"planes", f.Planes, 4},
		{"hosts", f.Hosts, 16},
		{"hostsPerT0", f.HostsPerT0, 4},
		{"t0PerPlane", f.T0PerPlane, 4},
		{"t1PerPlane", f.T1PerPlane, 4},
		{"hostLinkBps", f.HostLinkBps(), uint64(100e9)},
		{"fabricLinkBps", f.FabricLinkBps(), uint64(100e9)},
		{"hostLinkDelay", f.HostLinkPropDelay(), time.Microsecond},
		{"fabricLinkDelay", f.FabricLinkPropDelay(), time.Microsecond},
		{"mtu", f.MTU, 4200},
		{"forwarding", f.Forwarding, "usid"},
		{"ifgBytes", f.IFGBytes, 20},
		{"bufferBytes", f.Queue.BufferBytes, 1 << 20},
		{"ecn", f.Queue.ECN, ECNConfig{Enabled: true, Preset: ECNAuto}},
		{"trim", f.Queue.Trim, TrimConfig{Enabled: true, SizeBytes: 128}},
		{"pfc.enabled", f.Queue.PFC.Enabled, false},
		{"pfc.priorities", f.Queue.PFC.Priorities, []int{3}},
		{"pfc.xoff", f.Queue.PFC.XoffBytes, 96000},
		{"pfc.xon", f.Queue.PFC.XonBytes, 48000},
		{"pfc.headroom", f.Queue.PFC.HeadroomBytes, 0},
		{"watchdog", f.Queue.PFC.Watchdog, PFCWatchdogConfig{Enabled: true, Detection: "200ms", Restoration: "400ms", Action: "drop"}},
		{"host.tcp", c.Host.TCP, false},
		{"transport", c.Transport.Kind, "mrc"},
		{"pacing", c.Run.Pacing, "simulated"},
		{"duration", c.Run.RunDuration(), 10 * time.Millisecond},
		{"slowdown", c.Run.RealtimeSlowdown, 1.0},
		{"output.dir", c.Output.Dir, "out"},
		{"output.pcap", c.Output.Pcap, []string{}},
		{"output.pcapFormat", c.Output.PcapFormat, "pcapng"},
		{"output.pcapMaxPackets", c.Output.PcapMaxPackets, 1_000_000},
		{"output.pcapSnaplen", c.Output.PcapSnaplen, 256},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("default %s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	// Load with nothing is Default.
	got, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("Load(\"\", nil) = %+v, want Default() %+v", got, c)
	}
}

func TestPresets(t *testing.T) {
	tests := []struct {
		preset string
		planes int
		bps    uint64
	}{
		{"A", 4, 200e9},
		{"B", 8, 100e9},
		{"C", 4, 100e9},
		{"D", 1, 400e9},
	}
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			c, err := Load("", []string{"fabric.preset=" + tc.preset})
			if err != nil {
				t.Fatal(err)
			}
			f := c.Fabric
			if f.Preset != tc.preset || f.Topology != "clos" || f.Planes != tc.planes ||
				f.HostsPerT0 != 4 || f.T0PerPlane != 4 || f.T1PerPlane != 4 || f.Hosts != 16 ||
				f.HostLinkBps() != tc.bps || f.FabricLinkBps() != tc.bps {
				t.Errorf("preset %s gave %+v", tc.preset, f)
			}
			// ApplyPreset on Default gives the same fabric.
			d := Default()
			if err := ApplyPreset(&d, tc.preset); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d, c) {
				t.Errorf("ApplyPreset(Default, %s) = %+v, want %+v", tc.preset, d, c)
			}
		})
	}
	d := Default()
	if err := ApplyPreset(&d, "Z"); err == nil || d.Fabric.Preset != "Z" {
		t.Errorf("ApplyPreset(Z) = %v, preset %q; want an error and the name recorded", err, d.Fabric.Preset)
	}
	if got := PresetNames(); !slices.Equal(got, []string{"A", "B", "C", "D"}) {
		t.Errorf("PresetNames() = %v", got)
	}
}

func TestLoadPrecedence(t *testing.T) {
	path := writeYAML(t, `
seed: 7
fabric:
  preset: B          # 8 planes of 100G
  planes: 2          # file beats preset
  mtu: 9000
  queue:
    ecn:
      kmaxBytes: 300000
    pfc:
      priorities: [2, 5]
transport:
  kind: roce
output:
  pcap: [p0.t0.0/7, p1.t1.3/3, h15/p1]
`)
	c, err := Load(path, []string{"fabric.planes=3", "fabric.queue.ecn.kmaxBytes=300000", "seed=9"})
	if err != nil {
		t.Fatal(err)
	}
	f := c.Fabric
	if f.Preset != "B" || f.Planes != 3 || f.HostLinkBps() != 100e9 || f.MTU != 9000 ||
		f.Queue.ECN != (ECNConfig{Enabled: true, Preset: ECNCustom, KminBytes: 5000, KmaxBytes: 300000, Pmax: 0.01}) ||
		!slices.Equal(f.Queue.PFC.Priorities, []int{2, 5}) || c.Transport.Kind != "roce" ||
		c.Seed != 9 || !slices.Equal(c.Output.Pcap, []string{"p0.t0.0/7", "p1.t1.3/3", "h15/p1"}) {
		t.Errorf("file+set gave %+v", c)
	}

	// A --set preset beats the file's preset, and the file's explicit
	// fields still beat the preset.
	c, err = Load(path, []string{"fabric.preset=A"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Fabric.Preset != "A" || c.Fabric.HostLinkBps() != 200e9 || c.Fabric.Planes != 2 || c.Seed != 7 {
		t.Errorf("--set preset=A over file preset B gave %+v", c.Fabric)
	}

	// An explicit speed beats the preset, whatever the order.
	c, err = Load("", []string{"fabric.hostLinkSpeed=400G", "fabric.preset=D", "fabric.fabricLinkSpeed=800Gbps"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Fabric.HostLinkBps() != 400e9 || c.Fabric.FabricLinkBps() != 800e9 || c.Fabric.Planes != 1 {
		t.Errorf("preset D with explicit speeds gave %+v", c.Fabric)
	}

	// Later --set wins; lists are comma-separated; empty list.
	c, err = Load("", []string{"fabric.planes=5", "fabric.planes=6", "fabric.queue.pfc.priorities=3, 4", "output.pcap="})
	if err != nil {
		t.Fatal(err)
	}
	if c.Fabric.Planes != 6 || !slices.Equal(c.Fabric.Queue.PFC.Priorities, []int{3, 4}) || len(c.Output.Pcap) != 0 {
		t.Errorf("repeated/list --set gave planes %d priorities %v pcap %v", c.Fabric.Planes, c.Fabric.Queue.PFC.Priorities, c.Output.Pcap)
	}

	// YAML null keeps the default; an empty file is the defaults.
	c, err = Load(writeYAML(t, "fabric:\n  planes:\nrun:\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fabric.Planes != 4 {
		t.Errorf("null planes gave %d, want the default 4", c.Fabric.Planes)
	}
	c, err = Load(writeYAML(t, ""), nil)
	if err != nil || !reflect.DeepEqual(c, Default()) {
		t.Errorf("empty file gave %+v, %v", c, err)
	}
}

func TestLoadDerivedFields(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		sets  []string
		check func(Config) bool
	}{
		{"hosts derives t0PerPlane", "", []string{"fabric.hosts=32"},
			func(c Config) bool { return c.Fabric.T0PerPlane == 8 && c.Fabric.Hosts == 32 }},
		{"hostsPerT0 derives hosts", "fabric: {hostsPerT0: 8}", nil,
			func(c Config) bool { return c.Fabric.Hosts == 32 && c.Fabric.T0PerPlane == 4 }},
		{"t0PerPlane derives hosts over a preset", "", []string{"fabric.preset=D", "fabric.t0PerPlane=16"},
			func(c Config) bool { return c.Fabric.Hosts == 64 && c.Fabric.Planes == 1 }},
		{"hosts and t0PerPlane agree", "", []string{"fabric.hosts=24", "fabric.t0PerPlane=6"},
			func(c Config) bool { return c.Fabric.HostsPerT0 == 4 && c.Fabric.T0PerPlane == 6 }},
		{"fattree derives planes and hosts", "fabric: {topology: fattree, k: 8}", nil,
			func(c Config) bool {
				e, a, core, h := c.Fabric.FatTreeShape()
				return c.Fabric.Planes == 1 && c.Fabric.Hosts == 128 && c.Fabric.HostsPerT0 == 0 &&
					e == 32 && a == 32 && core == 16 && h == 4
			}},
		{"restoration follows detection", "", []string{"fabric.queue.pfc.enabled=true", "fabric.queue.pfc.watchdog.detection=100ms"},
			func(c Config) bool {
				w := c.Fabric.Queue.PFC.Watchdog
				return w.Restoration == "200ms" && w.RestorationTime() == 200*time.Millisecond
			}},
		{"explicit restoration kept", "", []string{"fabric.queue.pfc.watchdog.detection=100ms", "fabric.queue.pfc.watchdog.restoration=1s"},
			func(c Config) bool { return c.Fabric.Queue.PFC.Watchdog.Restoration == "1s" }},
		{"speed in bits/s", "fabric: {hostLinkSpeed: 25000000000bps}", nil,
			func(c Config) bool { return c.Fabric.HostLinkBps() == 25e9 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = writeYAML(t, tc.yaml)
			}
			c, err := Load(path, tc.sets)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected result: %+v", c.Fabric)
			}
		})
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	for _, sets := range [][]string{
		nil,
		{"fabric.preset=B", "fabric.queue.pfc.enabled=true", "fabric.queue.pfc.priorities=1,3", "output.pcap=h0/p7,p7.t1.3/3",
			"output.pcapFormat=pcap", "output.pcapMaxPackets=100", "output.pcapSnaplen=0"},
		{"fabric.topology=fattree", "fabric.k=6", "transport.kind=roce", "run.pacing=realtime", "run.realtimeSlowdown=2.5"},
	} {
		c, err := Load("", sets)
		if err != nil {
			t.Fatal(err)
		}
		y, err := c.YAML()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Load(writeYAML(t, string(y)), nil)
		if err != nil {
			t.Fatalf("reloading YAML() of %v: %v\n%s", sets, err, y)
		}
		if !reflect.DeepEqual(back, c) {
			t.Errorf("round trip of %v:\n got %+v\nwant %+v", sets, back, c)
		}
	}
}

func TestParseSpeed(t *testing.T) {
	good := map[string]uint64{
		"100G":           100e9,
		"100Gbps":        100e9,
		"400g":           400e9,
		"25000M":         25e9,
		"1.6T":           1.6e12,
		"10000000000bps": 10e9,
		"800G":           800e9,
		"2.5Gb/s":        2.5e9,
		" 40 G ":         40e9,
		"1500k":          1.5e6,
		"0G":             0,
		"999b/s":         999,
	}
	for in, want := range good {
		got, err := unit.ParseSpeed(in)
		if err != nil || got != want {
			t.Errorf("unit.ParseSpeed(%q) = %d, %v; want %d", in, got, err, want)
		}
		if want != 0 {
			if back, err := unit.ParseSpeed(unit.FormatSpeed(want)); err != nil || back != want {
				t.Errorf("unit.ParseSpeed(unit.FormatSpeed(%d) = %q) = %d, %v", want, unit.FormatSpeed(want), back, err)
			}
		}
	}
	if s := unit.FormatSpeed(1.6e12); s != "1.6T" {
		t.Errorf("unit.FormatSpeed(1.6e12) = %q", s)
	}
	for _, in := range []string{"", "fast", "G", "-100G", "1.2.3G", "1e9", "100X", "1.5", "0.5bps", "99999999999T", "100 Gigabit", "100", "0", "10000000000"} {
		if got, err := unit.ParseSpeed(in); err == nil {
			t.Errorf("unit.ParseSpeed(%q) = %d, want an error", in, got)
		}
	}
}

func TestHeadroom(t *testing.T) {
	p := Default().Fabric.Queue.PFC
	// 3 × 100 Gb/s × 1 us = 300000 bits = 37500 bytes.
	if got := p.Headroom(100e9, time.Microsecond); got != 37500 {
		t.Errorf("Headroom(100G, 1us) = %d, want 37500", got)
	}
	p.HeadroomBytes = 1234
	if got := p.Headroom(100e9, time.Microsecond); got != 1234 {
		t.Errorf("explicit Headroom = %d, want 1234", got)
	}
}

func TestFieldErrorFormat(t *testing.T) {
	c := Default()
	c.Fabric.Planes = 0
	err := c.Validate()
	if err == nil || err.Error() != "fabric.planes: must be 1..16, got 0" {
		t.Fatalf("Validate() = %q", err)
	}
	_, err = Load("", []string{"fabric.plnaes=8"})
	if err == nil || !strings.HasPrefix(err.Error(), "fabric.plnaes: unknown field") {
		t.Fatalf("Load(unknown) = %q", err)
	}
	// All problems at once.
	c = Default()
	c.Fabric.Planes = 17
	c.Transport.Kind = "udp"
	c.Run.Duration = "soon"
	fes := fieldErrors(t, c.Validate())
	var paths []string
	for _, fe := range fes {
		paths = append(paths, fe.Path)
	}
	if want := []string{"fabric.planes", "transport.kind", "run.duration"}; !slices.Equal(paths, want) {
		t.Errorf("Validate() paths = %v, want %v", paths, want)
	}
	if !strings.Contains(c.Validate().Error(), `transport.kind: must be one of "mrc", "roce", "mprdma", "random", "orderre", got "udp"`) {
		t.Errorf("message: %q", c.Validate())
	}
}

func TestInvalidConfigs(t *testing.T) {
	pfcOn := "fabric.queue.pfc.enabled=true"
	tests := []struct {
		name string
		yaml string   // config file content, "" for none
		sets []string // --set values
		want []string // exact paths of all the errors expected
	}{
		{"planes 0", "", []string{"fabric.planes=0"}, []string{"fabric.planes"}},
		{"planes 17", "", []string{"fabric.planes=17"}, []string{"fabric.planes"}},
		{"unknown topology", "fabric: {topology: mesh}", nil, []string{"fabric.topology"}},
		{"unknown forwarding", "", []string{"fabric.forwarding=spray"}, []string{"fabric.forwarding"}},
		{"hostsPerT0 0", "", []string{"fabric.hostsPerT0=0"}, []string{"fabric.hostsPerT0"}},
		{"hostsPerT0 too big", "", []string{"fabric.hostsPerT0=1025"}, []string{"fabric.hostsPerT0"}},
		{"t1PerPlane 0", "", []string{"fabric.t1PerPlane=0"}, []string{"fabric.t1PerPlane"}},
		{"hosts not divisible", "", []string{"fabric.hosts=18"}, []string{"fabric.hosts"}},
		{"hosts disagree with shape", "", []string{"fabric.hosts=20", "fabric.t0PerPlane=4"}, []string{"fabric.hosts"}},
		{"bad speed", "", []string{"fabric.hostLinkSpeed=fast"}, []string{"fabric.hostLinkSpeed"}},
		{"speed 0", "fabric: {fabricLinkSpeed: 0G}", nil, []string{"fabric.fabricLinkSpeed"}},
		{"speed above 1.6T", "", []string{"fabric.hostLinkSpeed=3.2T"}, []string{"fabric.hostLinkSpeed"}},
		{"negative delay", "", []string{"fabric.hostLinkDelay=-1us"}, []string{"fabric.hostLinkDelay"}},
		{"delay above 1s", "", []string{"fabric.fabricLinkDelay=2s"}, []string{"fabric.fabricLinkDelay"}},
		{"bad delay", "", []string{"fabric.fabricLinkDelay=1 microsecond"}, []string{"fabric.fabricLinkDelay"}},
		{"bad duration", "run: {duration: forever}", nil, []string{"run.duration"}},
		{"zero duration", "", []string{"run.duration=0s"}, []string{"run.duration"}},
		{"mtu 1000", "", []string{"fabric.mtu=1000"}, []string{"fabric.mtu"}},
		{"mtu 10000", "", []string{"fabric.mtu=10000"}, []string{"fabric.mtu"}},
		{"ifg 65", "", []string{"fabric.ifgBytes=65"}, []string{"fabric.ifgBytes"}},
		{"kmin >= kmax", "", []string{"transport.kind=roce", "fabric.queue.ecn.kminBytes=200000"}, []string{"fabric.queue.ecn.kminBytes"}},
		{"unknown ecn preset", "", []string{"fabric.queue.ecn.preset=dctcp"}, []string{"fabric.queue.ecn.preset"}},
		{"kmin with a named non-custom preset", "", []string{"fabric.queue.ecn.preset=seed002", "fabric.queue.ecn.kminBytes=1000"}, []string{"fabric.queue.ecn.kminBytes"}},
		{"kmin with a named preset in the file", "fabric: {queue: {ecn: {preset: hpcc, pmax: 0.5}}}", []string{"fabric.queue.bufferBytes=2000000"}, []string{"fabric.queue.ecn.pmax"}},
		{"custom replacing hpcc without kmax", "fabric: {queue: {bufferBytes: 2000000, ecn: {preset: hpcc}}}", []string{"fabric.queue.ecn.kminBytes=1000", "fabric.queue.ecn.pmax=0.5"}, []string{"fabric.queue.ecn.kmaxBytes"}},
		{"hpcc Kmax beyond the buffer", "", []string{"fabric.queue.ecn.preset=hpcc"}, []string{"fabric.queue.bufferBytes"}},
		{"hpcc Kmax beyond the buffer at the last hop's 400G", "", []string{"fabric.queue.ecn.preset=hpcc", "fabric.queue.bufferBytes=2000000", "fabric.hostLinkSpeed=400G", "fabric.queue.ecn.lastHop=true"}, []string{"fabric.queue.bufferBytes"}},
		{"kmax > buffer", "", []string{"transport.kind=roce", "fabric.queue.ecn.kmaxBytes=2000000"}, []string{"fabric.queue.ecn.kmaxBytes"}},
		{"pmax 0", "", []string{"transport.kind=roce", "fabric.queue.ecn.pmax=0"}, []string{"fabric.queue.ecn.pmax"}},
		{"pmax 1.5", "fabric: {queue: {ecn: {pmax: 1.5}}}\ntransport: {kind: roce}", nil, []string{"fabric.queue.ecn.pmax"}},
		{"trim size 10", "", []string{"fabric.queue.trim.sizeBytes=10"}, []string{"fabric.queue.trim.sizeBytes"}},
		{"pfc priority 9", "", []string{pfcOn, "fabric.queue.pfc.priorities=9"}, []string{"fabric.queue.pfc.priorities[0]"}},
		{"duplicate pfc priorities", "fabric: {queue: {pfc: {enabled: true, priorities: [3, 4, 3]}}}", nil, []string{"fabric.queue.pfc.priorities"}},
		{"no pfc priorities", "", []string{pfcOn, "fabric.queue.pfc.priorities="}, []string{"fabric.queue.pfc.priorities"}},
		{"xoff <= xon", "", []string{pfcOn, "fabric.queue.pfc.xoffBytes=48000"}, []string{"fabric.queue.pfc.xoffBytes"}},
		{"xoff >= buffer", "", []string{pfcOn, "fabric.queue.pfc.xoffBytes=1048576"}, []string{"fabric.queue.pfc.xoffBytes"}},
		{"negative headroom", "", []string{pfcOn, "fabric.queue.pfc.headroomBytes=-1"}, []string{"fabric.queue.pfc.headroomBytes"}},
		{"pfc mode adaptive", "", []string{pfcOn, "fabric.queue.pfc.mode=adaptive"}, []string{"fabric.queue.pfc.mode"}},
		{"negative shared buffer", "", []string{pfcOn, "fabric.queue.pfc.mode=dynamic", "fabric.queue.pfc.sharedBufferBytes=-1"}, []string{"fabric.queue.pfc.sharedBufferBytes"}},
		{"watchdog action reboot", "", []string{pfcOn, "fabric.queue.pfc.watchdog.action=reboot"}, []string{"fabric.queue.pfc.watchdog.action"}},
		{"watchdog detection 0", "", []string{pfcOn, "fabric.queue.pfc.watchdog.detection=0s"}, []string{"fabric.queue.pfc.watchdog.detection"}},
		{"odd k for fattree", "", []string{"fabric.topology=fattree", "fabric.k=5"}, []string{"fabric.k"}},
		{"k 66 for fattree", "", []string{"fabric.topology=fattree", "fabric.k=66"}, []string{"fabric.k"}},
		{"fattree with 4 planes", "", []string{"fabric.topology=fattree", "fabric.k=4", "fabric.planes=4"}, []string{"fabric.planes"}},
		{"fattree hosts mismatch", "", []string{"fabric.topology=fattree", "fabric.k=4", "fabric.hosts=20"}, []string{"fabric.hosts"}},
		{"qps per connection 0", "", []string{"transport.qpsPerConnection=0"}, []string{"transport.qpsPerConnection"}},
		{"payload unknown", "", []string{"transport.payload=some"}, []string{"transport.payload"}},
		{"mrc evs 64", "", []string{"transport.mrc.evsPerQP=64"}, []string{"transport.mrc.evsPerQP"}},
		{"mrc mpr 0", "", []string{"transport.mrc.mprUnits=0"}, []string{"transport.mrc.mprUnits"}},
		{"mrc rto bad", "", []string{"transport.mrc.rto=soon"}, []string{"transport.mrc.rto"}},
		{"mrc pmtu 100", "", []string{"transport.mrc.pmtu=100"}, []string{"transport.mrc.pmtu"}},
		{"mrc pmtu beyond the mtu", "", []string{"fabric.mtu=4092", "transport.mrc.pmtu=4096"}, []string{"transport.mrc.pmtu"}},
		{"tcp without netstack", "", []string{"host.tcp=true", "host.netstack=false"}, []string{"host.tcp"}},
		{"roce reliability", "", []string{"transport.roce.reliability=sr"}, []string{"transport.roce.reliability"}},
		{"roce cc", "", []string{"transport.roce.cc=hpcc"}, []string{"transport.roce.cc"}},
		{"roce retry 8", "", []string{"transport.roce.retryCount=8"}, []string{"transport.roce.retryCount"}},
		{"fattree with two link speeds", "", []string{"fabric.topology=fattree", "fabric.k=4", "fabric.fabricLinkSpeed=400G"}, []string{"fabric.fabricLinkSpeed"}},
		{"fattree with two link delays", "", []string{"fabric.topology=fattree", "fabric.k=4", "fabric.hostLinkDelay=2us"}, []string{"fabric.fabricLinkDelay"}},
		{"fattree k 46 beyond the uSID plan", "", []string{"fabric.topology=fattree", "fabric.k=46"}, []string{"fabric.k"}},
		{"1024 hosts per T0 beyond the uSID plan", "", []string{"fabric.hostsPerT0=1024", "fabric.t0PerPlane=1"}, []string{"fabric.hostsPerT0"}},
		{"unknown transport", "", []string{"transport.kind=tcp"}, []string{"transport.kind"}},
		{"unknown pacing", "run:\n  pacing: turbo\n", nil, []string{"run.pacing"}},
		{"realtimeSlowdown 0.5", "", []string{"run.realtimeSlowdown=0.5"}, []string{"run.realtimeSlowdown"}},
		{"empty output dir", "", []string{"output.dir="}, []string{"output.dir"}},
		{"pcap format pcapng2", "", []string{"output.pcapFormat=pcapng2"}, []string{"output.pcapFormat"}},
		{"pcap max packets 0", "", []string{"output.pcapMaxPackets=0"}, []string{"output.pcapMaxPackets"}},
		{"pcap max packets 1e8+1", "", []string{"output.pcapMaxPackets=100000001"}, []string{"output.pcapMaxPackets"}},
		{"pcap snaplen 63", "", []string{"output.pcapSnaplen=63"}, []string{"output.pcapSnaplen"}},
		{"pcap snaplen 65536", "", []string{"output.pcapSnaplen=65536"}, []string{"output.pcapSnaplen"}},
		{"pcap snaplen -1", "", []string{"output.pcapSnaplen=-1"}, []string{"output.pcapSnaplen"}},
		{"pcap unknown host", "", []string{"output.pcap=h16/p0"}, []string{"output.pcap"}},
		{"pcap port twice", "", []string{"output.pcap=h0/p0,p0.t1.0/0,h0/p0"}, []string{"output.pcap"}},
		{"pcap names skipped on a bad fabric", "", []string{"fabric.planes=0", "output.pcap=nope"}, []string{"fabric.planes"}},
		{"unknown yaml key", "fabric:\n  plnaes: 4\n", nil, []string{"fabric.plnaes"}},
		{"unknown top-level yaml key", "fabrik: {planes: 4}", nil, []string{"fabrik"}},
		{"unknown --set key", "", []string{"fabric.queue.ecn.kmax=3"}, []string{"fabric.queue.ecn.kmax"}},
		{"--set a section", "", []string{"fabric.queue=3"}, []string{"fabric.queue"}},
		{"--set without =", "", []string{"fabric.planes"}, []string{"--set"}},
		{"--set wrong type", "", []string{"fabric.planes=four"}, []string{"fabric.planes"}},
		{"yaml wrong type", "fabric:\n  planes: four\n", nil, []string{"fabric.planes"}},
		{"yaml negative seed", "seed: -1", nil, []string{"seed"}},
		{"yaml section as scalar", "fabric: 3", nil, []string{"fabric"}},
		{"preset Z", "", []string{"fabric.preset=Z"}, []string{"fabric.preset"}},
		{"preset Z in file", "fabric: {preset: Z}", nil, []string{"fabric.preset"}},
		{"bufferBytes < 2*MTU", "", []string{"fabric.queue.ecn.enabled=false", "fabric.queue.bufferBytes=8399"}, []string{"fabric.queue.bufferBytes"}},
		{"bufferBytes < 2*MTU with ECN on", "", []string{"fabric.mtu=9000", "fabric.queue.bufferBytes=17000", "fabric.queue.ecn.preset=dcqcn-sigcomm15"},
			[]string{"fabric.queue.bufferBytes", "fabric.queue.bufferBytes"}},
		{"several at once", "fabric: {planes: 0}", []string{"fabric.mtu=1", "run.pacing=x"},
			[]string{"fabric.planes", "fabric.mtu", "run.pacing"}},
	}
	if len(tests) < 20 {
		t.Fatalf("only %d invalid configs", len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = writeYAML(t, tc.yaml)
			}
			c, err := Load(path, tc.sets)
			if err == nil {
				t.Fatalf("Load succeeded, want errors naming %v; got %+v", tc.want, c)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Errorf("Load returned a non-zero Config with an error")
			}
			msg := err.Error()
			var got []string
			for _, fe := range fieldErrors(t, err) {
				got = append(got, fe.Path)
				if !strings.HasPrefix(fe.Error(), fe.Path+": ") {
					t.Errorf("error %q does not start with its path", fe)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("error paths = %v, want %v; error:\n%s", got, want, msg)
			}
			for _, p := range tc.want {
				if !strings.Contains(msg, p+": ") {
					t.Errorf("error does not name %s:\n%s", p, msg)
				}
			}
		})
	}
}
