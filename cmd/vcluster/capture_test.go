package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
)

func readCaptureFile(t *testing.T, path string) *pcap.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := pcap.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every command that runs a cluster captures its RDMA traffic on host
// and switch ports, both directions, into one pcapng with an interface
// per (point, port); the bound stops writing, not the run.
func TestCaptureEveryCommand(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		ifaces int // interfaces expected (points × ports)
	}{
		{"collective mrc", []string{"collective", "--hosts", "16", "--sizes", "256K"}, 2},
		{"collective roce", []string{"collective", "--hosts", "16", "--sizes", "256K", "--transport", "roce"}, 2},
		{"drill", []string{"drill", "--scenario", "t1-reboot", "--at", "50us", "--bytes", "1M"}, 4}, // the baseline and the run under the plan
		{"experiment", []string{"experiment", "p2p", "--quick"}, 32},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append(append([]string{}, tc.args...), "--progress", "none", "--set", "output.dir="+dir,
				"--set", "output.pcap=h0/p0,p0.t0.0/0")
			if tc.name == "experiment" {
				args = append(args, "--out", dir)
			}
			code, _, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr)
			}
			f := readCaptureFile(t, filepath.Join(dir, cluster.CaptureFileNG))
			if !f.NG || len(f.Interfaces) != tc.ifaces {
				t.Fatalf("ng %v, %d interfaces, want %d", f.NG, len(f.Interfaces), tc.ifaces)
			}
			for i, ifc := range f.Interfaces {
				if want := []string{"h0/p0", "p0.t0.0/0"}[i%2]; ifc.Name != want || !strings.HasPrefix(ifc.Description, "point ") {
					t.Errorf("interface %d: %q %q, want %q, point …", i, ifc.Name, ifc.Description, want)
				}
			}
			dirs := map[pcap.Direction]int{}
			for _, r := range f.Records {
				dirs[r.Dir]++
				if len(r.Data) > 256 || r.OrigLen < len(r.Data) {
					t.Fatalf("record of %d bytes (wire %d): snaplen 256", len(r.Data), r.OrigLen)
				}
			}
			if dirs[pcap.DirInbound] == 0 || dirs[pcap.DirOutbound] == 0 {
				t.Errorf("directions %v: want both", dirs)
			}
			if tc.name == "experiment" {
				// The report lists what the command wrote beside it.
				md, err := os.ReadFile(filepath.Join(dir, "report.md"))
				if err != nil || !strings.Contains(string(md), "config.yaml, counters.csv, capture.pcapng.") {
					t.Errorf("report.md's Files line does not list the counters and the capture (%v)", err)
				}
			}
			if !strings.Contains(stderr, "capture (pcapng, snaplen 256 B)") {
				t.Errorf("no capture summary on stderr:\n%s", stderr)
			}
			if _, ok := tshark.Path(); ok && strings.HasPrefix(tc.name, "collective") {
				// RoCE's RDMA WRITEs decode as InfiniBand; MRC's frames are
				// UDP 4791 with MRC opcodes (tools/wireshark decodes them).
				rows := tshark.Fields(t, filepath.Join(dir, cluster.CaptureFileNG), "udp.dstport == 4791", "frame.interface_name", "infiniband.bth.opcode")
				if len(rows) == 0 {
					t.Fatal("tshark: no RoCEv2 frames")
				}
				if tc.name == "collective roce" && (!hasField(rows, 1, "6") || !hasField(rows, 1, "17")) { // RC RDMA WRITE First, Acknowledge
					t.Errorf("tshark: no RDMA WRITE First or no ACK among %d frames", len(rows))
				}
			}
		})
	}
}

func hasField(rows [][]string, col int, v string) bool {
	for _, r := range rows {
		if col < len(r) && r[col] == v {
			return true
		}
	}
	return false
}

// The bound: exactly pcapMaxPackets frames are written, the rest counted.
func TestCaptureBound(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "collective", "--hosts", "16", "--sizes", "1M", "--progress", "none", "--set", "output.dir="+dir,
		"--set", "output.pcap=h0/p0", "--set", "output.pcapMaxPackets=100", "--set", "output.pcapFormat=pcap")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	f := readCaptureFile(t, filepath.Join(dir, "h0_p0.pcap"))
	if f.NG || len(f.Records) != 100 {
		t.Fatalf("ng %v, %d records, want a classic file of 100", f.NG, len(f.Records))
	}
	if !strings.Contains(stderr, "100 frames written") || strings.Contains(stderr, " 0 not written (output") {
		t.Errorf("summary does not count the frames past the bound:\n%s", stderr)
	}
}

// An unknown port is refused before anything runs or is written, by
// every command, with the valid ranges.
func TestCaptureUnknownPortRefused(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--quick"},
		{"experiment", "p2p", "--quick"},
		{"collective", "--hosts", "16", "--sizes", "256K"},
		{"drill", "--scenario", "t1-reboot"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		args = append(args, "--set", "output.dir="+dir, "--set", "output.pcap=h99/p0")
		if args[0] == "run" || args[0] == "experiment" {
			args = append(args, "--out", dir)
		}
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, `output.pcap: no port named "h99/p0": hosts are h0..`) {
			t.Errorf("%v: exit %d:\n%s", args, code, stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: %s was created", args, dir)
		}
	}
}

// ping's --payload is a size like every other: 1K sends 1024 data bytes.
func TestPingPayloadUnits(t *testing.T) {
	code, out, stderr := runCLI(t, "ping", "--to", "1", "--count", "1", "--payload", "1K")
	if code != 0 || !strings.Contains(out, "1032 bytes from") {
		t.Fatalf("exit %d:\n%s%s", code, out, stderr)
	}
}

// Invalid flags beside a capture are refused before the capture file is
// created: exit 2, nothing written.
func TestCaptureNotStartedForBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"collective", "--hosts", "16", "--sizes", "1M", "--parallel", "2"},
		{"drill", "--scenario", "t1-reboot", "--workload", "foo"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		code, _, stderr := runCLI(t, append(args, "--set", "output.dir="+dir, "--set", "output.pcap=h0/p0")...)
		if code != 2 || !strings.Contains(stderr, "--") {
			t.Errorf("%v: exit %d:\n%s", args, code, stderr)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: %s was created", args, dir)
		}
	}
}

// A drill's fault-free baseline is a cluster of the run like the faulted
// one: failover's counters.csv has both for each point and its events
// count both.
func TestBaselineObserved(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "experiment", "failover", "--quick", "--out", dir, "--progress", "log")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, countersFile))
	if err != nil {
		t.Fatal(err)
	}
	clusters := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		// point,"label",cluster,...
		i := strings.LastIndex(line, `",`)
		pt, _, _ := strings.Cut(line, ",")
		cl, _, _ := strings.Cut(line[i+2:], ",")
		clusters[pt+"/"+cl] = true
	}
	for _, k := range []string{"1/1", "1/2", "2/1", "2/2"} {
		if !clusters[k] {
			t.Errorf("counters.csv has no block for point/cluster %s (has %v)", k, clusters)
		}
	}
	var m manifest
	mb, _ := os.ReadFile(filepath.Join(dir, manifestFile))
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("done, 4 points, %d events", m.Events); !strings.Contains(stderr, want) {
		t.Errorf("progress and manifest disagree: want %q in\n%s", want, stderr)
	}
}
