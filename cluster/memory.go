package cluster

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/vcluster/vcluster/config"
)

// MemoryEstimate is the live heap a run is expected to need, in bytes,
// estimated from its config before anything is built (EstimateMemory).
type MemoryEstimate struct {
	Fabric  uint64 // switches, their ports and every port's egress link (NIC ports too)
	Hosts   uint64 // hosts: NIC and engine, netstack when host.netstack, and their QPs
	Buffers uint64 // registered payload bytes (hosts × bytes per host; 0 with payload elided)
	Total   uint64
}

// Per-element live-heap costs, measured with runtime.ReadMemStats after
// building clusters of 16, 1024 and 4096 hosts (clos, 4 and 8 planes, and a
// k=16 fat-tree) and connecting every host to its ring neighbour
// (TestMemoryEstimateMatchesBuild keeps them honest, within ±50%).
const (
	memBase        = 32 << 10 // the loop and the cluster's fixed structures
	memPerPort     = 1000     // one port (switch or NIC) with its queues and its egress link
	memPerSwitch   = 2000     // a switch's own state and forwarding tables
	memPerHost     = 256      // a bare host: NIC, RDMA engine, addresses
	memPerNetstack = 14_600   // a gVisor netstack (host.netstack)

	// One QP end. MRC: a fixed part, its receive window (mprUnits × 128
	// PSNs) and its entropy values; RoCE: go-back-N or IRN state.
	memMRCQPBase = 5_400
	memMRCPerMPR = 7_312
	memMRCPerEV  = 56
	// RoCE since #18: its queues are internal/ring FIFOs that grow on first
	// use, so a connected QP holds ~1.8 kB (GBN) / ~2.3 kB (IRN) of its own,
	// plus ~2.7 kB of engine slot and CQ (measured, 2000 QPs).
	memRoCEQPGBN = 4_600
	memRoCEQPIRN = 5_100
)

// EstimateMemory estimates the live heap of the cluster cfg describes,
// computed from the config alone without building anything: the fabric
// (switches, ports, links), the hosts with a ring of connections (one per
// host, transport.qpsPerConnection QPs each: every host holds a QP end to
// each neighbour, as all-reduce and a permutation do; all-to-all holds
// more) and payloadBytesPerHost of registered memory on every host (source and
// destination buffers together) when transport.payload is real. cfg should
// be valid; counts it cannot derive count as zero. The Go collector lets the
// heap grow past the live size between collections (GOGC), so the process
// may briefly need more.
func EstimateMemory(cfg config.Config, payloadBytesPerHost uint64) MemoryEstimate {
	_, _, hosts, _ := fabricCounts(cfg.Fabric)
	return EstimateMemoryConns(cfg, payloadBytesPerHost, hosts)
}

// EstimateMemoryConns is EstimateMemory for a workload that connects
// connections pairs of hosts (each transport.qpsPerConnection QPs, a QP
// end on either host) instead of a ring: e.g. 8192 flows of a permutation
// on cluster B, whose 131 072 hosts mostly stay idle.
func EstimateMemoryConns(cfg config.Config, payloadBytesPerHost, connections uint64) MemoryEstimate {
	switches, switchPorts, hosts, nicPorts := fabricCounts(cfg.Fabric)
	var e MemoryEstimate
	e.Fabric = memBase + (switchPorts+nicPorts)*memPerPort + switches*memPerSwitch
	perHost := uint64(memPerHost)
	if cfg.Host.Netstack {
		perHost += memPerNetstack
	}
	qpEnds := satMul(2*connections, nonNeg(cfg.Transport.QPsPerConnection))
	e.Hosts = satAdd(hosts*perHost, satMul(qpEnds, qpBytes(cfg.Transport)))
	if cfg.Transport.Payload != config.PayloadElided {
		e.Buffers = satMul(hosts, payloadBytesPerHost)
	}
	e.Total = satAdd(satAdd(e.Fabric, e.Hosts), e.Buffers)
	return e
}

// fabricCounts counts what the fabric f describes: switches, switch ports,
// hosts and NIC ports (one per host per plane).
func fabricCounts(f config.FabricConfig) (switches, switchPorts, hosts, nicPorts uint64) {
	switch f.Topology {
	case config.TopologyFatTree:
		edge, agg, core, perEdge := f.FatTreeShape()
		k := uint64(f.K)
		switches = uint64(edge + agg + core)
		switchPorts = switches * k
		hosts = uint64(edge * perEdge)
		nicPorts = hosts
	default:
		p, h, t0, t1 := nonNeg(f.Planes), nonNeg(f.HostsPerT0), nonNeg(f.T0PerPlane), nonNeg(f.T1PerPlane)
		switches = p * (t0 + t1)
		switchPorts = p * (t0*(h+t1) + t1*t0) // T0: hosts + uplinks; T1: one downlink per T0
		hosts = h * t0
		nicPorts = hosts * p
	}
	return switches, switchPorts, hosts, nicPorts
}

// qpBytes is the live heap of one QP end of the configured transport
// (TransportKind.QPBytes; 0 for a kind that does not say).
func qpBytes(t config.TransportConfig) uint64 {
	if k, ok := transports[t.Kind]; ok && k.QPBytes != nil {
		return k.QPBytes(t)
	}
	return 0
}

func nonNeg(n int) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// satMul and satAdd saturate at the largest uint64: a payload of 1 EiB on
// 10^5 hosts must read as "too much", not wrap to a small number.
func satMul(a, b uint64) uint64 {
	if a != 0 && b > ^uint64(0)/a {
		return ^uint64(0)
	}
	return a * b
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

// AvailableMemory is the memory this process can still use, in bytes:
// MemAvailable from /proc/meminfo, or the room left under the cgroup's
// memory limit (v2 memory.max − memory.current, or v1 limit_in_bytes −
// usage_in_bytes) when that is lower. It returns 0 when it cannot tell
// (no /proc/meminfo: not Linux); callers then check nothing.
func AvailableMemory() uint64 {
	avail := uint64(0)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		avail, _ = parseMemAvailable(f)
		f.Close()
	}
	if room, ok := cgroupRoom(); ok && (avail == 0 || room < avail) {
		avail = room
	}
	return avail
}

// parseMemAvailable reads the MemAvailable line of /proc/meminfo ("kB" are
// KiB).
func parseMemAvailable(r io.Reader) (uint64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, false
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n = satMul(n, 1024)
		}
		return n, true
	}
	return 0, false
}

// cgroupRoom is limit − usage of the cgroup the process runs in (the
// namespaced view at /sys/fs/cgroup), if it has a limit.
func cgroupRoom() (uint64, bool) {
	for _, p := range [][2]string{
		{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
		{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
	} {
		limit, ok := readUint(p[0])
		if !ok {
			continue
		}
		usage, _ := readUint(p[1])
		return cgroupLimitRoom(limit, usage)
	}
	return 0, false
}

// cgroupLimitRoom is what is left under a cgroup limit; "no limit" (v2
// "max", v1 a value near 2^63) reports false.
func cgroupLimitRoom(limit, usage uint64) (uint64, bool) {
	if limit >= 1<<62 {
		return 0, false
	}
	if usage >= limit {
		return 1, true // full; 0 would read as "cannot tell"
	}
	return limit - usage, true
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return ^uint64(0), true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}
