package endpoint

import (
	"runtime"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// MaxHostBytes is the memory budget of one host (netstack + NIC +
// addressing), measured as live heap after GC.
const MaxHostBytes = 48 << 10

// buildSpec is a 4-plane Clos of hosts hosts: 32 per T0, 32 T1s.
func buildSpec(hosts int) fabric.ClosSpec {
	return fabric.ClosSpec{Planes: 4, HostsPerT0: 32, T0: hosts / 32, T1: 32,
		HostRate: 400e9, FabricRate: 400e9, HostDelay: 500 * time.Nanosecond, FabricDelay: time.Microsecond}
}

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// measureBuild builds the hosts of a hosts-host Clos and returns the live
// heap they add per host and the wall time NewHosts took.
func measureBuild(tb testing.TB, hosts int, mode fabric.ForwardingMode) (bytesPerHost float64, wall time.Duration) {
	tb.Helper()
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo, err := fabric.BuildClos(loop, buildSpec(hosts), fabric.DefaultOptions(mode))
	if err != nil {
		tb.Fatal(err)
	}
	before := heapAfterGC()
	start := time.Now()
	hs, err := NewHosts(loop, topo, HostOptions{})
	wall = time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	after := heapAfterGC()
	runtime.KeepAlive(hs)
	runtime.KeepAlive(topo)
	return float64(int64(after)-int64(before)) / float64(hosts), wall
}

func TestMemoryPerHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1024 hosts")
	}
	per, wall := measureBuild(t, 1024, fabric.ForwardUSID)
	t.Logf("1024 hosts: %.1f KiB/host, built in %v", per/1024, wall)
	if per > MaxHostBytes {
		t.Fatalf("%.1f KiB per host, budget %d KiB", per/1024, MaxHostBytes>>10)
	}
	if goroutines := runtime.NumGoroutine(); goroutines > 16 {
		t.Fatalf("%d goroutines after building hosts without TCP", goroutines)
	}
}

// BenchmarkBuild8192Hosts builds 8192 hosts (4 planes) per iteration and
// reports live heap per host and wall time per build.
//
//	go test ./endpoint -run '^$' -bench Build8192 -benchtime 3x
func BenchmarkBuild8192Hosts(b *testing.B) {
	var per, ms float64
	for i := 0; i < b.N; i++ {
		p, w := measureBuild(b, 8192, fabric.ForwardUSID)
		per += p
		ms += float64(w.Milliseconds())
	}
	b.ReportMetric(per/float64(b.N)/1024, "KiB/host")
	b.ReportMetric(ms/float64(b.N), "wall-ms/build")
}
