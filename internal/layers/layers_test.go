// Package layers holds the test that keeps vcluster's import rule true:
// each package imports only packages below it (docs/architecture.md).
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/vcluster/vcluster"

// rank orders vcluster's packages bottom-up; a package may import only
// packages of strictly lower rank. Packages not listed fail the test, so a
// new package must be placed here (and in docs/architecture.md).
var rank = map[string]int{
	"internal/ring":        5,  // the shared FIFO
	"internal/rng":         5,  // the one seeded RNG
	"units":                5,  // sizes, durations, speeds: syntax and texts
	"ib":                   25, // IB transport headers and PSN arithmetic (RoCEv2, MRC)
	"sim":                  10,
	"ib/orderre":           15, // OrderRE's signals in reserved RoCEv2 bits (transport and ToR)
	"fabric/pcap":          10,
	"fabric":               20,
	"pathquality":          22, // seed 003's control plane over fabric's counters and tables
	"verbs":                30,
	"verbs/verbstest":      35, // the transport conformance kit (imported by tests)
	"mrc":                  40,
	"roce":                 40,
	"mprdma":               45, // MP-RDMA, Random and OrderRE (on roce's wire codec)
	"endpoint":             50,
	"config":               55,
	"cluster":              60,
	"collectives":          70,
	"faults":               80,
	"compose/tunnel":       84, // lab tunnel frames (no simulated layer)
	"compose/tunbridge":    84, // TUN devices in network namespaces
	"compose/labspec":      85, // a lab's scaled config
	"compose/labapi":       86, // the lab processes' JSON shapes
	"compose/labproc":      88, // a lab's processes by PID and marker
	"compose":              90,
	"compose/labfabric":    92, // vcluster fabric
	"compose/labhost":      92, // vcluster host
	"compose/labdocker":    93, // compose files and the Docker Engine API
	"compose/labcni":       94, // the CNI plugin vcluster-cni
	"compose/lab":          95, // vcluster lab and its runtimes
	"experiments":          100,
	"wallclock":            105, // the only wall-clock reader: never below experiments
	"internal/hugeheap":    108, // process memory advice, for the CLI's benches
	"internal/memprobe":    109, // machine memory probe (reads no clock), for the CLI
	"cmd/vcluster":         110,
	"cmd/vcluster-cni":     110,
	"internal/tshark":      200, // test helper
	"internal/layers":      200,
	"internal/clustertest": 200, // test helper
	"tools/wireshark":      200, // the MRC dissector's tests
}

// wallOK lists who may import wallclock (it sits high so that nothing
// simulated can reach the wall clock).
var wallOK = map[string]bool{"experiments": true, "compose": true, "cmd/vcluster": true}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		r, ok := rank[pkg]
		if !ok {
			t.Errorf("package %q has no layer: add it to rank here and to docs/architecture.md", pkg)
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			checked++
			if dep == "wallclock" {
				if !wallOK[pkg] && !strings.HasPrefix(pkg, "compose/") {
					t.Errorf("%s imports wallclock: simulated layers use the loop's clock", pkg)
				}
				continue
			}
			if rank[dep] >= r {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must point down", pkg, r, dep, rank[dep])
			}
		}
	}
	if checked == 0 {
		t.Fatal("no internal imports found: the check saw nothing")
	}
}
