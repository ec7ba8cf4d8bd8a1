package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/sim"
)

// config.CheckCapturePorts knows the fabric's names without building it:
// for every preset, odd Clos shapes and two fat-trees, every name the
// built topology has is accepted, and every name one number away from
// one of them (±1, a leading zero) is accepted exactly when the topology
// has it.
func TestCapturePortsMatchTopology(t *testing.T) {
	shapes := [][]string{
		nil,
		{"fabric.hostsPerT0=3", "fabric.t0PerPlane=5", "fabric.t1PerPlane=2", "fabric.planes=2"},
		{"fabric.hostsPerT0=1", "fabric.t0PerPlane=1", "fabric.t1PerPlane=1", "fabric.planes=1"},
		{"fabric.hostsPerT0=12", "fabric.t0PerPlane=11", "fabric.t1PerPlane=10", "fabric.planes=1"}, // two-digit numbers
		{"fabric.topology=fattree", "fabric.k=4"},
		{"fabric.topology=fattree", "fabric.k=6"},
	}
	for _, p := range config.PresetNames() {
		shapes = append(shapes, []string{"fabric.preset=" + p})
	}
	digits := regexp.MustCompile(`[0-9]+`)
	for _, sets := range shapes {
		cfg := load(t, sets...)
		topo, err := BuildTopology(sim.NewLoop(sim.Options{Seed: 1}), cfg)
		if err != nil {
			t.Fatal(err)
		}
		names := topo.PortNames()
		has := map[string]bool{}
		for _, n := range names {
			has[n] = true
		}
		check := func(name string) error {
			c := cfg
			c.Output.Pcap = []string{name}
			return config.CheckCapturePorts(c)
		}
		c := cfg
		c.Output.Pcap = names
		if err := config.CheckCapturePorts(c); err != nil {
			t.Fatalf("%v: the topology's own names refused: %v", sets, err)
		}
		tried, accepted := 0, 0
		for _, n := range names {
			for _, loc := range digits.FindAllStringIndex(n, -1) {
				v, _ := strconv.Atoi(n[loc[0]:loc[1]])
				for _, repl := range []string{strconv.Itoa(v + 1), strconv.Itoa(v - 1), "0" + n[loc[0]:loc[1]]} {
					m := n[:loc[0]] + repl + n[loc[1]:]
					err := check(m)
					tried++
					if (err == nil) != has[m] {
						t.Fatalf("%v: %q: CheckCapturePorts = %v, but the topology has it: %v", sets, m, err, has[m])
					}
					if err == nil {
						accepted++
					}
				}
			}
		}
		t.Logf("%v: %d ports; %d neighbouring names tried, %d of them ports", sets, len(names), tried, accepted)
		if accepted == 0 || accepted == tried {
			t.Fatalf("%v: %d of %d neighbours accepted: the test proves nothing", sets, accepted, tried)
		}
	}
}

// captureOut is an output config capturing names into dir.
func captureOut(t *testing.T, dir string, sets ...string) config.OutputConfig {
	t.Helper()
	return load(t, append(sets, "output.dir="+dir)...).Output
}

// countDirs counts each interface's records per direction.
func countDirs(f *pcap.File) map[uint32][3]int {
	n := map[uint32][3]int{}
	for _, r := range f.Records {
		c := n[r.Iface]
		c[r.Dir]++
		n[r.Iface] = c
	}
	return n
}

func readCapture(t *testing.T, path string) *pcap.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := pcap.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mrcPorts are the ports the MRC tests capture: h0's in every plane and
// the T0 ports facing h15 (MRC sprays over the planes, and a SACK goes
// back on the plane of the packet that drew it), and h20/p0, which a
// 16-host cluster lacks.
var mrcPorts = []string{"h0/p0", "h0/p1", "h0/p2", "h0/p3", "p0.t0.3/3", "p1.t0.3/3", "p2.t0.3/3", "p3.t0.3/3", "h20/p0"}

// mrcCapture runs a 1 MiB MRC write h0 → h15 capturing mrcPorts, and
// returns the capture file, the summary and the cluster.
func mrcCapture(t *testing.T, dir string) (string, string, *Cluster) {
	out := captureOut(t, dir, "fabric.hosts=32", "output.pcap="+strings.Join(mrcPorts, ","))
	capt, err := NewCapture(out, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := mrcCluster(t)
	if err := capt.Attach(c, "mrc 1MiB"); err != nil {
		t.Fatal(err)
	}
	runTransfer(t, c, 0, 15, 1<<20, 0, nil)
	if err := capt.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, CaptureFileNG), capt.Summary(), c
}

// An MRC transfer captured at host ports and switch ports: one pcapng
// interface per port with its name and point, data one way and SACKs the
// other, frames cut to the snaplen, the port the cluster lacks noted;
// tshark reads the interfaces and the addresses; a rerun writes the same
// bytes.
func TestCaptureMRC(t *testing.T) {
	dir := t.TempDir()
	file, sum, c := mrcCapture(t, dir)
	t.Log(sum)
	f := readCapture(t, file)
	names := mrcPorts[:8]
	if !f.NG || len(f.Interfaces) != len(names) {
		t.Fatalf("NG %v, interfaces %+v", f.NG, f.Interfaces)
	}
	for i, want := range names {
		ifc := f.Interfaces[i]
		if ifc.Name != want || ifc.Description != "point mrc 1MiB" || ifc.SnapLen != 256 || ifc.TSResol != 9 || ifc.LinkType != pcap.LinkTypeEthernet {
			t.Errorf("interface %d = %+v", i, ifc)
		}
	}
	// Data out of h0's ports and out of the T0 ports to h15 in every
	// plane; SACKs into them (in whichever planes they took).
	dirs := countDirs(f)
	var sacks, both [2]int
	for id, name := range names {
		d := dirs[uint32(id)]
		if d[pcap.DirOutbound] < 50 || d[pcap.DirUnknown] != 0 {
			t.Errorf("%s: %d out, %d unknown", name, d[pcap.DirOutbound], d[pcap.DirUnknown])
		}
		sacks[id/4] += d[pcap.DirInbound]
		if d[pcap.DirInbound] > 0 {
			both[id/4]++
		}
	}
	if sacks[0] < 10 || sacks[0] != sacks[1] || both[0] == 0 || both[1] == 0 {
		t.Errorf("%d frames into h0's ports, %d into the T0 ports from h15; %d and %d ports saw both directions", sacks[0], sacks[1], both[0], both[1])
	}
	cut := 0
	for _, r := range f.Records {
		if len(r.Data) > 256 {
			t.Fatalf("a record of %d bytes", len(r.Data))
		}
		if r.OrigLen > 256 {
			cut++
			if len(r.Data) != 256 {
				t.Fatalf("a %d-byte frame stored as %d bytes", r.OrigLen, len(r.Data))
			}
		}
	}
	if cut < 2*256 { // 256 data packets, each seen at two ports
		t.Errorf("%d frames longer than the snaplen", cut)
	}
	for _, want := range []string{
		"capture (pcapng, snaplen 256 B): " + strconv.Itoa(len(f.Records)) + " frames written, 0 not written",
		"h0/p0 (point mrc 1MiB), interface 0: ",
		`note: point "mrc 1MiB": h20/p0 not captured: no port named "h20/p0": hosts are h0..h15, planes p0..p3`,
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q", want)
		}
	}

	rows := tshark.Fields(t, file, "", "frame.interface_name", "frame.interface_description", "ipv6.src", "_ws.malformed")
	if len(rows) != len(f.Records) {
		t.Fatalf("tshark read %d frames, the reader %d", len(rows), len(f.Records))
	}
	host := map[string]string{}
	for pl := range 4 {
		host[fabric.AddrString(c.Topo.HostAddr(0, pl))] = "h0"
		host[fabric.AddrString(c.Topo.HostAddr(15, pl))] = "h15"
	}
	seen := map[string]int{}
	for i, r := range rows {
		if r[0] != f.Interfaces[f.Records[i].Iface].Name || r[1] != "point mrc 1MiB" || r[3] != "" {
			t.Fatalf("tshark row %d: %q", i, r)
		}
		// ipv6.src lists the outer (uSID) and the inner source: the host.
		src := host[r[2][strings.LastIndex(r[2], ",")+1:]]
		at := "switch"
		if r[0][0] == 'h' {
			at = "host"
		}
		seen[at+" "+f.Records[i].Dir.String()+" from "+src]++
	}
	for _, k := range []string{"host outbound from h0", "host inbound from h15", "switch outbound from h0", "switch inbound from h15"} {
		if seen[k] == 0 {
			t.Errorf("no frame %s; saw %v", k, seen)
		}
	}

	again, _, _ := mrcCapture(t, t.TempDir())
	a, _ := os.ReadFile(file)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed, different captures (%d and %d bytes)", len(a), len(b))
	}
}

// roceCapture runs 2 MiB of RoCE writes h0 → h15 on plane 0, capturing
// h0's port and the T0 port facing h15, with the given extra output sets.
func roceCapture(t *testing.T, dir string, sets ...string) *Capture {
	capt, err := NewCapture(captureOut(t, dir, append([]string{"output.pcap=h0/p0,p0.t0.3/3"}, sets...)...), dir)
	if err != nil {
		t.Fatal(err)
	}
	c := roceCluster(t)
	if err := capt.Attach(c, ""); err != nil {
		t.Fatal(err)
	}
	tr := startWrite(t, c, 2<<20, randomFill(3))
	c.Loop.RunWhile(func() bool { return !tr.Done() })
	if len(tr.Errors) > 0 {
		t.Fatal(tr.Errors[0])
	}
	if err := capt.Close(); err != nil {
		t.Fatal(err)
	}
	return capt
}

// A RoCE transfer captured at a host port and a switch port decodes in
// tshark as InfiniBand over RoCEv2 — write opcodes one way, ACKs the other,
// no malformed frame, no expert info but the zero UDP checksum;
// output.pcapMaxPackets bounds what is written and
// counts the rest.
func TestCaptureRoCE(t *testing.T) {
	dir := t.TempDir()
	capt := roceCapture(t, dir)
	written, over := capt.Written()
	t.Log(capt.Summary())
	file := filepath.Join(dir, CaptureFileNG)
	rows := tshark.FieldsArgs(t, file, tshark.DecodeRoCEv2, "", "frame.interface_name", "frame.packet_flags_direction",
		"infiniband.bth.opcode", "_ws.malformed", "_ws.expert.message")
	if uint64(len(rows)) != written || over != 0 || written < 1000 {
		t.Fatalf("tshark %d frames, %d written, %d not", len(rows), written, over)
	}
	count := map[string]int{}
	for _, r := range rows {
		if r[3] != "" {
			t.Fatalf("malformed frame: %q", r)
		}
		// RoCE sends UDP checksum 0 (RoCEv2's ICRC guards the packet),
		// which Wireshark flags over IPv6: the one expert note allowed.
		for _, m := range strings.Split(r[4], ",") {
			if m != "" && m != "Illegal checksum value (0)" {
				t.Fatalf("expert info %q: %q", m, r)
			}
		}
		dir, _ := strconv.ParseUint(r[1], 0, 8)
		op, err := strconv.ParseUint(r[2], 0, 8)
		if err != nil {
			continue // not RoCE (netstack's neighbour discovery, say)
		}
		kind := "other"
		switch {
		case uint8(op) >= roce.OpWriteFirst && uint8(op) <= roce.OpWriteOnlyImm:
			kind = "write"
		case uint8(op) == roce.OpAck:
			kind = "ack"
		}
		count[r[0]+" "+pcap.Direction(dir).String()+" "+kind]++
	}
	t.Logf("decoded: %v", count)
	for _, k := range []string{"h0/p0 outbound write", "h0/p0 inbound ack", "p0.t0.3/3 outbound write", "p0.t0.3/3 inbound ack"} {
		if count[k] == 0 {
			t.Errorf("no %s frames", k)
		}
	}
	// A single-cluster pcapng run: one interface per port, no description.
	f := readCapture(t, file)
	if len(f.Interfaces) != 2 || f.Interfaces[0].Name != "h0/p0" || f.Interfaces[1].Name != "p0.t0.3/3" || f.Interfaces[0].Description != "" {
		t.Errorf("interfaces %+v", f.Interfaces)
	}

	// The same run bounded to 100 frames: the first 100 written, the
	// rest counted.
	dir2 := t.TempDir()
	bounded := roceCapture(t, dir2, "output.pcapMaxPackets=100")
	w2, over2 := bounded.Written()
	f2 := readCapture(t, filepath.Join(dir2, CaptureFileNG))
	if w2 != 100 || len(f2.Records) != 100 || w2+over2 != written {
		t.Fatalf("bounded: %d written (%d in the file), %d not, of %d", w2, len(f2.Records), over2, written)
	}
	for i := range f2.Records {
		a, b := f.Records[i], f2.Records[i]
		if a.TS != b.TS || a.Iface != b.Iface || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("bounded record %d differs from the unbounded run's", i)
		}
	}
	if !strings.Contains(bounded.Summary(), "100 frames written, "+strconv.FormatUint(over2, 10)+" not written (output.pcapMaxPackets 100)") {
		t.Errorf("summary: %s", bounded.Summary())
	}
}

// Classic pcap files: <port>.pcap for one cluster; once a second attaches,
// <point>-<port>.pcap for each; snaplen 0 keeps whole frames.
func TestCaptureClassicFilesAcrossClusters(t *testing.T) {
	dir := t.TempDir()
	capt, err := NewCapture(captureOut(t, dir, "output.pcap=h0/p0,p0.t0.3/3", "output.pcapFormat=pcap", "output.pcapSnaplen=0"), dir)
	if err != nil {
		t.Fatal(err)
	}
	run := func(point string) {
		c := mrcCluster(t)
		if err := capt.Attach(c, point); err != nil {
			t.Fatal(err)
		}
		runTransfer(t, c, 0, 15, 256<<10, 0, nil)
	}
	run("a")
	if _, err := os.Stat(filepath.Join(dir, "h0_p0.pcap")); err != nil {
		t.Fatalf("one cluster: %v", err)
	}
	run("b")
	// The second cluster's attach ended the first: its files are closed
	// (flushed whole) before the capture is, so a run of many points keeps
	// one point's files open, not all of them.
	for _, p := range capt.ports {
		if p.point == 0 && (!p.done || len(readCapture(t, p.path).Records) == 0) {
			t.Fatalf("%s of point 0 still open (done %v) after point 1 attached", p.path, p.done)
		}
		if p.point == 1 && p.done {
			t.Fatalf("%s of the running point closed", p.path)
		}
	}
	if err := capt.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"0-h0_p0.pcap", "0-p0.t0.3_3.pcap", "1-h0_p0.pcap", "1-p0.t0.3_3.pcap"}
	var got []string
	for _, f := range capt.Files() {
		got = append(got, filepath.Base(f))
	}
	ents, _ := os.ReadDir(dir)
	var onDisk []string
	for _, e := range ents {
		onDisk = append(onDisk, e.Name())
	}
	if !slices.Equal(got, want) || !slices.Equal(onDisk, want) {
		t.Fatalf("files %v, on disk %v, want %v", got, onDisk, want)
	}
	var sizes []int
	for _, name := range want {
		f := readCapture(t, filepath.Join(dir, name))
		if f.NG || f.Interfaces[0].SnapLen != pcap.DefaultSnapLen || len(f.Records) < 10 {
			t.Fatalf("%s: NG %v, %+v, %d records", name, f.NG, f.Interfaces, len(f.Records))
		}
		whole := 0
		for _, r := range f.Records {
			if len(r.Data) != r.OrigLen {
				t.Fatalf("%s: a %d-byte frame stored as %d bytes", name, r.OrigLen, len(r.Data))
			}
			if r.OrigLen > 4096 {
				whole++
			}
		}
		if whole == 0 {
			t.Errorf("%s: no full data frame", name)
		}
		sizes = append(sizes, len(f.Records))
	}
	// The two clusters are the same run: the same frames.
	if sizes[0] != sizes[2] || sizes[1] != sizes[3] {
		t.Errorf("records per file %v", sizes)
	}
}

// A partitioned cluster is refused by config (with the reason) and, given
// to Attach anyway, left untapped with a note.
func TestCapturePartitioned(t *testing.T) {
	bad, err := config.Load("", append(HtsimFatTreeSets(4), "output.pcap=h0/p0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckParallel(bad); err == nil || !strings.Contains(err.Error(), "output.pcap (a capture's files are written by one goroutine") {
		t.Fatalf("CheckParallel = %v", err)
	}
	c, err := NewPartitioned(load(t, HtsimFatTreeSets(4)...), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	capt, err := NewCapture(bad.Output, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := capt.Attach(c, "p"); err != nil {
		t.Fatal(err)
	}
	if err := capt.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(capt.Summary(), `note: point "p": not captured: a partitioned cluster`) || len(readCapture(t, filepath.Join(dir, CaptureFileNG)).Interfaces) != 0 {
		t.Errorf("summary %s", capt.Summary())
	}
	// The classic cluster of --parallel 0 runs as a one-worker partitioned
	// run: one goroutine, so it is captured.
	one, err := NewForWorkers(load(t, HtsimFatTreeSets(4)...), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	dir1 := t.TempDir()
	capt1, err := NewCapture(bad.Output, dir1)
	if err != nil {
		t.Fatal(err)
	}
	if err := capt1.Attach(one, "p"); err != nil {
		t.Fatal(err)
	}
	if err := capt1.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(readCapture(t, filepath.Join(dir1, CaptureFileNG)).Interfaces); n != 1 || strings.Contains(capt1.Summary(), "not captured") {
		t.Errorf("classic cluster: %d interfaces, summary %s", n, capt1.Summary())
	}
}

// No ports, no capture: nil, and its methods do nothing.
func TestCaptureNone(t *testing.T) {
	dir := t.TempDir()
	capt, err := NewCapture(captureOut(t, dir), dir)
	if capt != nil || err != nil {
		t.Fatalf("NewCapture without ports = %v, %v", capt, err)
	}
	if err := capt.Attach(mrcCluster(t), "x"); err != nil || capt.Close() != nil || capt.Summary() != "" || capt.Files() != nil {
		t.Fatal("a nil Capture did something")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files written: %v", ents)
	}
	if _, err := NewCapture(config.OutputConfig{Pcap: []string{"h0/p0"}, PcapFormat: "pcapng", PcapMaxPackets: 0}, dir); err == nil {
		t.Error("pcapMaxPackets 0 accepted")
	}
}

// Capturing costs no allocation per frame: 2 ms of a transfer through
// three tapped ports, after 1 ms of warm-up.
func TestCaptureSteadyStateAllocations(t *testing.T) {
	dir := t.TempDir()
	capt, err := NewCapture(captureOut(t, dir, "output.pcap=h0/p0,p0.t0.0/0,h15/p0", "output.pcapMaxPackets=100000000"), dir)
	if err != nil {
		t.Fatal(err)
	}
	c := mrcCluster(t, "transport.payload=elided")
	if err := capt.Attach(c, ""); err != nil {
		t.Fatal(err)
	}
	startWrite(t, c, 1<<30, nil)
	c.Loop.RunUntil(sim.Millisecond)
	w0, _ := capt.Written()
	allocs := mallocs(func() { c.Loop.RunUntil(3 * sim.Millisecond) })
	w1, over := capt.Written()
	frames := w1 - w0
	t.Logf("%d frames captured in 2 ms of virtual time, %d allocations (%.4f per frame)", frames, allocs, float64(allocs)/float64(frames))
	if frames < 1000 || over != 0 || float64(allocs)/float64(frames) > 0.01 {
		t.Errorf("%d allocations for %d captured frames (%d not written)", allocs, frames, over)
	}
	if err := capt.Close(); err != nil {
		t.Fatal(err)
	}
}

// startWrite starts writing n bytes from h0 to h15 (the last host) in
// chunks of up to 1 MiB.
func startWrite(t *testing.T, c *Cluster, n uint64, fill func([]byte)) *Transfer {
	t.Helper()
	ps, err := c.Connect(0, 15)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.StartTransfer(ps[0], c.Region(0, n, fill), c.Region(15, n, nil), n, min(n, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// mallocs returns the heap allocations f makes.
func mallocs(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.Mallocs - m0.Mallocs
}
