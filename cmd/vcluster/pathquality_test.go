package main

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/experiments"
	"github.com/vcluster/vcluster/internal/clustertest"
	"github.com/vcluster/vcluster/sim"
)

// pqSets are a small RoCE fabric under forwarding pathquality with
// microsecond-scaled control-plane periods.
var pqSets = []string{"fabric.preset=D", "fabric.hosts=16", "fabric.forwarding=pathquality", "transport.kind=roce",
	"transport.payload=elided", "host.netstack=false",
	"fabric.pathQuality.samplePeriod=5us", "fabric.pathQuality.advertisePeriod=10us", "fabric.pathQuality.hdc.rdmaThreshold=1us"}

// pqTransfers starts an incast onto host 0 from hosts of every other T0
// on c and runs it for 40 µs, mid-transfer.
func pqTransfers(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	for _, src := range []int{4, 8, 12, 5} {
		clustertest.Transfer(t, c, src, 0, 1<<20, 256<<10)
	}
	c.Loop.RunUntil(40 * sim.Microsecond)
}

// /metrics serves the control plane's per-link and per-route gauges, its
// totals and each switch's HDC records, equal to what the control plane
// reports mid-run, with the experiment and point labels, and passing
// promlint.
func TestMetricsPathQuality(t *testing.T) {
	m, o := testEndpoint(t)
	o.Begin("pq")
	o.Point(0, 1, "incast")
	c := testCluster(t, pqSets...)
	o.Watch(c)
	pqTransfers(t, c)
	o.End()
	cp := c.PathQuality
	st := cp.Stats()
	if st.Samples == 0 || st.UpdatesSent == 0 || st.HDCRecords == 0 {
		t.Fatalf("the run does not exercise the control plane: %+v", st)
	}
	for _, p := range lintCollector(t, m) {
		if strings.Contains(p.Metric, "pathquality") || strings.Contains(p.Metric, "hdc") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	v := parseMetrics(t, scrapeText(t, m))
	at := []string{`experiment="pq"`, `point="incast"`}
	for name, want := range map[string]uint64{
		"vcluster_pathquality_updates_total":            st.UpdatesSent,
		"vcluster_pathquality_updates_suppressed_total": st.UpdatesSuppressed,
		"vcluster_pathquality_update_bytes_total":       st.UpdateBytes,
		"vcluster_pathquality_weight_changes_total":     st.WeightChanges,
		"vcluster_hdc_records_total":                    st.HDCRecords,
	} {
		if got := sum(v, name, at...); got != float64(want) {
			t.Errorf("%s = %g, the control plane says %d", name, got, want)
		}
	}
	links, busy := cp.Links(), 0
	for _, l := range links {
		key := func(name string) string {
			return name + `{experiment="pq",point="incast",port="` + l.Port + `",switch="` + l.Switch + `"}`
		}
		for name, want := range map[string]float64{"vcluster_pathquality_link_utilization": l.Utilization,
			"vcluster_pathquality_link_score": l.Score, "vcluster_pathquality_link_quality_gbps": l.QualityGbps} {
			if got, ok := v[key(name)]; !ok || got != want {
				t.Errorf("%s = %g (served %v), want %g", key(name), got, ok, want)
			}
		}
		if l.Utilization > 0 {
			busy++
		}
	}
	if busy == 0 {
		t.Error("no link with utilization above 0")
	}
	routes := cp.Routes()
	for _, r := range routes {
		k := `vcluster_pathquality_advertised_gbps{experiment="pq",point="incast",subnet="` + strconv.Itoa(r.Subnet) + `",switch="` + r.Switch + `"}`
		if got, ok := v[k]; !ok || got != r.Advertised {
			t.Errorf("%s = %g (served %v), want %g", k, got, ok, r.Advertised)
		}
	}
	if len(links) == 0 || len(routes) == 0 {
		t.Fatalf("%d links, %d routes", len(links), len(routes))
	}
}

// With fabric.pathQuality on, vcluster run writes the control plane's
// four files, one block per cluster of the experiment (the preflight
// runs without it), lists them in the manifest and the report; without
// it, none.
func TestRunPathQualityFiles(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := runCLI(t, "run", "--quick", "--out", dir, "--progress", "none", "--seeds", "1",
		"--set", "exp.size=1M", "--set", "exp.losses=0", "--set", "exp.roceQPs=1",
		// Mode on: the experiment's rows set their own forwarding (usid
		// for MRC, ecmp for RoCE), under which auto would be off.
		"--set", "fabric.pathQuality.mode=on", "--set", "fabric.pathQuality.samplePeriod=20us", "--set", "fabric.pathQuality.advertisePeriod=50us",
		"--set", "fabric.pathQuality.hdc.rdmaThreshold=100ns", "--set", "fabric.pathQuality.hdc.otherThreshold=100ns")
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m experiments.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{pqSamplesFile, pqAdvertsFile, hdcJSONLFile, hdcPcapFile} {
		if !slices.Contains(m.Files, f) {
			t.Errorf("manifest files %v lack %s", m.Files, f)
		}
	}
	for _, f := range []string{pqSamplesFile, pqAdvertsFile} {
		rows := readCSV(t, filepath.Join(dir, f))
		if len(rows) < 2 || len(rows[0]) < 4 || !slices.Equal(rows[0][:3], []string{"point", "label", "cluster"}) {
			t.Fatalf("%s: %d rows, want a point,label,cluster,… header and rows", f, len(rows))
		}
		points := map[string]bool{}
		for _, r := range rows[1:] {
			if len(r) != len(rows[0]) || r[0] == "point" {
				t.Fatalf("%s: row %v under the header %v", f, r, rows[0])
			}
			points[r[0]] = true
		}
		if points["preflight"] || len(points) < 2 {
			t.Errorf("%s: blocks of points %v, want every point's, not the preflight's", f, points)
		}
	}
	jl, err := os.ReadFile(filepath.Join(dir, hdcJSONLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(jl)), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s: %q: %v", hdcJSONLFile, line, err)
		}
		if _, ok := rec["point"]; !ok || rec["switch"] == nil {
			t.Fatalf("%s: %q lacks point or switch", hdcJSONLFile, line)
		}
	}
	pc, err := os.ReadFile(filepath.Join(dir, hdcPcapFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(pc) < pcapFileHeaderLen || binary.LittleEndian.Uint32(pc) != 0xa1b2c3d4 && binary.LittleEndian.Uint32(pc) != 0xa1b23c4d {
		t.Fatalf("%s: %d bytes, no pcap header", hdcPcapFile, len(pc))
	}
	// One file header: the records of every cluster follow it, each
	// 16 bytes of record header and its bytes.
	n := 0
	for off := pcapFileHeaderLen; off < len(pc); n++ {
		if off+16 > len(pc) {
			t.Fatalf("%s: a truncated record header at %d", hdcPcapFile, off)
		}
		off += 16 + int(binary.LittleEndian.Uint32(pc[off+8:]))
	}
	if want := bytes.Count(jl, []byte("\n")); n != want || n == 0 {
		t.Errorf("%s: %d records, %s %d", hdcPcapFile, n, hdcJSONLFile, want)
	}

	off := t.TempDir()
	if code, _, errOut := runCLI(t, "run", "--quick", "--out", off, "--progress", "none", "--seeds", "1",
		"--set", "exp.size=1M", "--set", "exp.losses=0", "--set", "exp.roceQPs=1"); code != 0 {
		t.Fatalf("run exited %d: %s", code, errOut)
	}
	for _, f := range []string{pqSamplesFile, pqAdvertsFile, hdcJSONLFile, hdcPcapFile} {
		if _, err := os.Stat(filepath.Join(off, f)); !os.IsNotExist(err) {
			t.Errorf("%s written with the control plane off (%v)", f, err)
		}
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// An invalid fabric.pathQuality value, and mode off under forwarding
// pathquality, exit 2 naming the field before anything is written.
func TestPathQualityConfigExit2(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"fabric.forwarding=pathquality", "fabric.pathQuality.weights.bandwidth=-1"}, "fabric.pathQuality.weights.bandwidth: "},
		{[]string{"fabric.forwarding=pathquality", "fabric.pathQuality.samplePeriod=5"}, "fabric.pathQuality.samplePeriod: "},
		{[]string{"fabric.forwarding=pathquality", "fabric.pathQuality.mode=off"}, "fabric.pathQuality.mode: off with fabric.forwarding pathquality"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		args := []string{"run", "--out", dir, "--progress", "none"}
		for _, s := range tc.sets {
			args = append(args, "--set", s)
		}
		code, out, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.sets, code, out, errOut, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v: the output directory was created", tc.sets)
		}
	}
}
