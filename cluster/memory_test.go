package cluster

import (
	"runtime"
	"strings"
	"testing"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The estimate is within ±50% of the live heap a real build takes (no
// connection: EstimateMemoryConns with 0), and of the build plus a ring of
// connections (every host to the next: EstimateMemory), on clusters of
// several sizes, shapes and transports. The payload is elided: Buffers is
// exact by construction (hosts × bytes).
func TestMemoryEstimateMatchesBuild(t *testing.T) {
	cases := [][]string{
		{"fabric.preset=C"},
		{"fabric.preset=C", "fabric.hostsPerT0=32", "fabric.t0PerPlane=32", "fabric.t1PerPlane=8"},
		{"fabric.preset=C", "fabric.hostsPerT0=64", "fabric.t0PerPlane=64", "fabric.t1PerPlane=8", "host.netstack=false"},
		{"fabric.preset=B", "fabric.hostsPerT0=32", "fabric.t0PerPlane=32", "fabric.t1PerPlane=16", "transport.kind=roce", "host.netstack=false"},
		{"fabric.topology=fattree", "fabric.k=16", "transport.mrc.mprUnits=16"},
	}
	if testing.Short() {
		cases = cases[:2]
	}
	for _, sets := range cases {
		cfg := load(t, append(sets, "transport.payload=elided")...)
		est := EstimateMemory(cfg, 1<<30)
		bare := EstimateMemoryConns(cfg, 1<<30, 0)
		h0 := liveHeap()
		c, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		built := liveHeap() - h0
		n := len(c.Hosts)
		for i := range n {
			if _, err := c.Connect(i, (i+1)%n); err != nil {
				t.Fatal(err)
			}
		}
		got := liveHeap() - h0
		runtime.KeepAlive(c)
		c.Close()
		ratio := float64(est.Total) / float64(got)
		t.Logf("%s: %d hosts: estimate %.1f MiB (fabric %.1f, hosts %.1f, buffers %d), measured %.1f MiB, ratio %.2f",
			strings.Join(sets, " "), n, mib(est.Total), mib(est.Fabric), mib(est.Hosts), est.Buffers, mib(got), ratio)
		if est.Buffers != 0 {
			t.Errorf("%s: elided payload estimated at %d buffer bytes, want 0", sets, est.Buffers)
		}
		if ratio < 0.5 || ratio > 1.5 {
			t.Errorf("%s: estimate %d B is %.2f× the measured %d B, want within ±50%%", sets, est.Total, ratio, got)
		}
		bareRatio := float64(bare.Total) / float64(built)
		t.Logf("  build alone: estimate %.1f MiB, measured %.1f MiB, ratio %.2f", mib(bare.Total), mib(built), bareRatio)
		if bareRatio < 0.5 || bareRatio > 1.5 {
			t.Errorf("%s: build estimate %d B is %.2f× the measured %d B, want within ±50%%", sets, bare.Total, bareRatio, built)
		}
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func TestMemoryEstimateScales(t *testing.T) {
	small := EstimateMemory(load(t, "fabric.preset=C"), 0)
	big := EstimateMemory(load(t, "fabric.preset=C", "fabric.hostsPerT0=64", "fabric.t0PerPlane=64"), 0)
	if !(big.Fabric > 100*small.Fabric/2 && big.Hosts == 256*small.Hosts) {
		t.Errorf("16 → 4096 hosts: fabric %d → %d, hosts %d → %d; want the hosts part ×256 and the fabric to grow with it",
			small.Fabric, big.Fabric, small.Hosts, big.Hosts)
	}
	real := EstimateMemory(load(t, "fabric.preset=C"), 1<<30)
	if want := uint64(16 << 30); real.Buffers != want {
		t.Errorf("16 hosts × 1 GiB real payload: buffers %d, want %d", real.Buffers, want)
	}
	if real.Total != real.Fabric+real.Hosts+real.Buffers {
		t.Errorf("total %d is not fabric + hosts + buffers (%d + %d + %d)", real.Total, real.Fabric, real.Hosts, real.Buffers)
	}
	// A payload that overflows uint64 saturates instead of wrapping.
	if huge := EstimateMemory(load(t, "fabric.preset=C"), 1<<62); huge.Total != ^uint64(0) {
		t.Errorf("16 hosts × 2^62 bytes: total %d, want saturated", huge.Total)
	}
}

func TestParseMemAvailable(t *testing.T) {
	in := "MemTotal:       24576000 kB\nMemFree:        1000 kB\nMemAvailable:   23000000 kB\n"
	got, ok := parseMemAvailable(strings.NewReader(in))
	if !ok || got != 23000000*1024 {
		t.Errorf("parseMemAvailable = %d, %v; want %d", got, ok, 23000000*1024)
	}
	if _, ok := parseMemAvailable(strings.NewReader("MemTotal: 1 kB\n")); ok {
		t.Error("no MemAvailable line: want not ok")
	}
	if room, ok := cgroupLimitRoom(8<<30, 3<<30); !ok || room != 5<<30 {
		t.Errorf("cgroup 8 GiB limit, 3 GiB used: room %d, %v", room, ok)
	}
	if _, ok := cgroupLimitRoom(9223372036854771712, 1<<30); ok {
		t.Error("cgroup v1 'no limit' reported as a limit")
	}
	if room, ok := cgroupLimitRoom(1<<30, 2<<30); !ok || room == 0 {
		t.Errorf("cgroup over its limit: room %d, %v; want a small non-zero room", room, ok)
	}
	if AvailableMemory() == 0 && runtime.GOOS == "linux" {
		t.Error("AvailableMemory() = 0 on Linux")
	}
}
