// Package config defines the single YAML schema of a vcluster run: the
// fabric (topology, links, queues, ECN, trimming, PFC), the hosts, the
// transport, the run itself and its outputs.
//
// A Config is obtained with Default or Load. Load starts from Default,
// applies a preset (fabric.preset), merges a YAML file and `key=value`
// overrides, fills derived fields (Normalize) and finally calls Validate.
// docs/config.md is the reference for every field.
//
// Derived fields use the zero value to mean "derive me": fabric.hosts,
// fabric.t0PerPlane (from fabric.hosts), fabric.planes for fat-trees and
// fabric.queue.pfc.watchdog.restoration. Load zeroes such a field when the
// user did not set it explicitly so that it follows the fields it derives
// from; Normalize then fills it in.
//
// The transports own their sections. transport.kind is any kind config
// holds a section for or that was registered (RegisterTransportKind; the
// cluster registers each kind it can build). A section — transport.mrc,
// transport.roce — is a TransportConfig field whose type is its
// transport's (mrc.Settings, roce.Settings): the transport declares the
// fields, their defaults and their rules (Section), and config decodes it
// and runs its Validate through a verbs.SectionChecker that words the
// messages and records the rules for Schema (transport.go). A new kind
// without knobs needs nothing here; one with knobs adds its section's
// field to TransportConfig, because Load reads the Config type itself.
package config

import (
	"bytes"
	"fmt"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mprdma"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/roce"
	unit "github.com/vcluster/vcluster/units"
	"go.yaml.in/yaml/v3"
)

// Topology names.
const (
	TopologyClos    = fabric.KindClos    // multi-plane two-tier Clos (T0/T1 per plane)
	TopologyFatTree = fabric.KindFatTree // three-tier k-ary fat-tree, one plane
)

// Forwarding modes.
const (
	ForwardingECMP   = fabric.ForwardECMPName
	ForwardingUSID   = fabric.ForwardUSIDName
	ForwardingStatic = fabric.ForwardStaticName
)

// Transport kinds.
const (
	TransportMRC     = "mrc"
	TransportRoCE    = "roce"
	TransportMPRDMA  = mprdma.KindMPRDMA
	TransportRandom  = mprdma.KindRandom
	TransportOrderRE = mprdma.KindOrderRE
	PayloadReal      = "real"
	PayloadElided    = "elided"
)

// Pacing modes.
const (
	PacingSimulated = "simulated"
	PacingRealtime  = "realtime"
)

// PFC threshold modes (fabric.queue.pfc.mode).
const (
	PFCStatic  = "static"  // fixed xoffBytes / xonBytes per (port, priority)
	PFCDynamic = "dynamic" // HPCC's switch MMU: free shared buffer >> shift
)

// PFC watchdog actions.
const (
	WatchdogDrop    = fabric.WatchdogDropName
	WatchdogForward = fabric.WatchdogForwardName
	WatchdogAlert   = fabric.WatchdogAlertName
)

// Limits enforced by Validate.
const (
	MaxPlanes    = 16
	MaxSwitchDim = 1024              // max hostsPerT0, t0PerPlane, t1PerPlane
	MaxLinkBps   = 1_600_000_000_000 // 1.6 Tb/s
	MaxLinkDelay = time.Second       // max propagation delay of one link
	// MaxSwitchLatency bounds fabric.switchLatency and MaxNICLatency
	// host.nicTxLatency and host.nicRxLatency: 100 µs, two orders of
	// magnitude above any switch pipeline or NIC (hundreds of ns to a few
	// µs).
	MaxSwitchLatency = 100 * time.Microsecond
	MaxNICLatency    = 100 * time.Microsecond
	// MaxECMPReconvergence bounds fabric.ecmpReconvergence: 10 s, beyond
	// BGP's slowest detection with its default timers shortened to the
	// 3 s / 9 s data centres use (RFC 7938 §7.1).
	MaxECMPReconvergence = 10 * time.Second
	MinMTU               = 1280        // IPv6 minimum link MTU
	MaxMTU               = 9216        // jumbo frames
	MaxIFGBytes          = 64          // preamble + IFG overhead
	MinTrimBytes         = 64          // smallest trimmed packet
	MaxTrimBytes         = 512         // largest trimmed packet
	MinFatTreeK          = 4           // smallest fat-tree arity
	MaxFatTreeK          = 64          // largest fat-tree arity
	MaxPriority          = 7           // 802.1p priorities are 0..7
	MinPMTU              = mrc.MinPMTU // smallest MRC payload per packet
	MaxPMTU              = mrc.MaxPMTU // largest MRC payload per packet
	// MRCPacketOverhead is what a full MRC data packet adds to its payload
	// inside the IPv6 MTU (mrc.PacketOverhead, 88 bytes).
	MRCPacketOverhead = mrc.PacketOverhead
	DefaultBuffer     = 1 << 20                // per egress port buffer, 1 MiB
	defaultDelay      = "1us"                  // host and fabric link delay
	defaultSpeed      = "100G"                 // host and fabric link speed
	defaultDetect     = 200 * time.Millisecond // PFC watchdog detection time
)

// Bounds on what feeds allocation and timers, enforced by Validate
// (docs/config.md, "Limits").
const (
	MinLinkBps = 1_000_000 // 1 Mb/s
	// MaxHosts is the most hosts (NICs) a fabric may have: the paper's
	// cluster B, 131 072 NICs, the largest cluster vcluster reproduces
	// (≈ 4 GiB to build; docs/benchmarks.md).
	MaxHosts = 131_072
	// MaxPorts bounds every port of the fabric, switch and NIC ones
	// (each with its egress link, ≈ 1 KiB): twice cluster B's 4 194 304.
	MaxPorts = 1 << 23
	// MaxBufferBytes is the largest per egress port buffer: 256 MiB, above
	// the largest on-chip shared buffer of a datacenter switch chip
	// (Tomahawk 5, 165 MB), so one port may hold all a chip has.
	MaxBufferBytes = 256 << 20
	MaxRunDuration = time.Hour        // simulated time of one run
	MaxWatchdog    = 10 * time.Second // PFC watchdog detection and restoration
	MaxTimeout     = time.Second      // transport.mrc.rto, transport.roce.timeout, transport.mprdma.rto, transport.orderre.repairTimeout (mrc.MaxRTO, roce.MaxTimeout, mprdma.MaxRTO)
	// MaxRealtimeSlowdown bounds run.realtimeSlowdown (1 simulated µs per
	// wall second).
	MaxRealtimeSlowdown = 1e6
)

// Config is one vcluster run.
type Config struct {
	// Seed seeds every random stream of the run (loss, ECN marking, EVs,
	// workloads): the same config and seed give byte-identical outputs.
	Seed      uint64          `mapstructure:"seed" yaml:"seed" json:"seed"`
	Fabric    FabricConfig    `mapstructure:"fabric" yaml:"fabric" json:"fabric"`
	Host      HostConfig      `mapstructure:"host" yaml:"host" json:"host"`
	Transport TransportConfig `mapstructure:"transport" yaml:"transport" json:"transport"`
	Run       RunConfig       `mapstructure:"run" yaml:"run" json:"run"`
	Output    OutputConfig    `mapstructure:"output" yaml:"output" json:"output"`
}

// FabricConfig describes the switched network.
type FabricConfig struct {
	// Topology is "clos" (multi-plane 2-tier) or "fattree" (3-tier k-ary, one plane).
	Topology string `mapstructure:"topology" yaml:"topology" json:"topology"`
	// Preset is "" or one of "A", "B", "C", "D"; applied before explicit fields.
	Preset string `mapstructure:"preset" yaml:"preset" json:"preset"`
	// Planes is the number of parallel planes, 1..16 (must be 1 for fattree).
	Planes int `mapstructure:"planes" yaml:"planes" json:"planes"`
	// Hosts is the total number of hosts (NICs). For clos it equals
	// HostsPerT0*T0PerPlane; for fattree k^3/4. 0 means derive.
	Hosts int `mapstructure:"hosts" yaml:"hosts" json:"hosts"`
	// HostsPerT0 is the number of hosts below each T0 (clos only), 1..1024.
	HostsPerT0 int `mapstructure:"hostsPerT0" yaml:"hostsPerT0" json:"hostsPerT0"`
	// T0PerPlane is the number of T0 switches in each plane (clos only),
	// 1..1024. 0 means derive from Hosts/HostsPerT0.
	T0PerPlane int `mapstructure:"t0PerPlane" yaml:"t0PerPlane" json:"t0PerPlane"`
	// T1PerPlane is the number of T1 switches in each plane (clos only),
	// 1..1024; each T0 has one uplink to each T1 of its plane.
	T1PerPlane int `mapstructure:"t1PerPlane" yaml:"t1PerPlane" json:"t1PerPlane"`
	// K is the fat-tree arity (fattree only), even, 4..64.
	K int `mapstructure:"k" yaml:"k" json:"k"`
	// HostLinkSpeed is the host-T0 link speed, e.g. "100G" (see units.ParseSpeed).
	HostLinkSpeed string `mapstructure:"hostLinkSpeed" yaml:"hostLinkSpeed" json:"hostLinkSpeed"`
	// FabricLinkSpeed is the T0-T1 (fat-tree edge-agg and agg-core) speed.
	FabricLinkSpeed string `mapstructure:"fabricLinkSpeed" yaml:"fabricLinkSpeed" json:"fabricLinkSpeed"`
	// HostLinkDelay is the host link propagation delay (Go duration), 0..1s.
	HostLinkDelay string `mapstructure:"hostLinkDelay" yaml:"hostLinkDelay" json:"hostLinkDelay"`
	// FabricLinkDelay is the fabric link propagation delay (Go duration), 0..1s.
	FabricLinkDelay string `mapstructure:"fabricLinkDelay" yaml:"fabricLinkDelay" json:"fabricLinkDelay"`
	// SwitchLatency is every switch's forwarding (pipeline) latency (Go
	// duration), 0..100µs: each frame a switch sends — after its egress
	// queue and serialization — reaches the wire this much later, so every
	// switch traversal costs it once (fabric.Link.Pipeline).
	SwitchLatency string `mapstructure:"switchLatency" yaml:"switchLatency" json:"switchLatency"`
	// ECMPReconvergence is the BGP-style routing reconvergence delay of
	// forwarding ecmp and pathquality (Go duration), 0..10s: a link that goes down stays
	// in the switches' ECMP groups (flows hashed onto it are lost) until
	// this much later, when every switch drops the next hops that no
	// longer reach a destination; a link coming up is put back the same
	// delay later. "" (the default) never reconverges: the groups stay as
	// built, as before the field existed. uSID forwarding is unaffected.
	ECMPReconvergence string `mapstructure:"ecmpReconvergence" yaml:"ecmpReconvergence" json:"ecmpReconvergence"`
	// MTU is the IPv6 payload MTU in bytes, 1280..9216.
	MTU int `mapstructure:"mtu" yaml:"mtu" json:"mtu"`
	// Forwarding is "ecmp", "usid", "static" or "pathquality" (ECMP
	// weighted by fabric.pathQuality's advertised path bandwidth).
	Forwarding string `mapstructure:"forwarding" yaml:"forwarding" json:"forwarding"`
	// ECMPSeed seeds the switches' ECMP hash.
	ECMPSeed uint64 `mapstructure:"ecmpSeed" yaml:"ecmpSeed" json:"ecmpSeed"`
	// IFGBytes is the per-frame preamble+IFG overhead on the wire, 0..64.
	IFGBytes int `mapstructure:"ifgBytes" yaml:"ifgBytes" json:"ifgBytes"`
	// Queue configures every egress port.
	Queue QueueConfig `mapstructure:"queue" yaml:"queue" json:"queue"`
	// TorMulticast is OrderRE's programmable ToR on every T0 (edge)
	// switch: the multicast forwarding table the sender's ToR keeps from
	// the transport's piggybacked signals, the FReTx replication onto the
	// registered fast paths, the receiver's ToR de-duplication
	// (docs/tor-multicast.md).
	TorMulticast TorMulticastConfig `mapstructure:"torMulticast" yaml:"torMulticast" json:"torMulticast"`
	// PathQuality is seed 003's control plane on every switch: counter
	// sampling, high-delay capture (INT/HDC), link scores and path
	// bandwidth advertisements, which forwarding pathquality weighs its
	// next hops by (package pathquality, docs/pathquality.md).
	PathQuality PathQualityConfig `mapstructure:"pathQuality" yaml:"pathQuality" json:"pathQuality"`
}

// TorMulticastConfig configures the programmable ToRs (fabric.TorMulticastConfig).
type TorMulticastConfig struct {
	// Mode is "auto" (on when transport.kind is orderre, the transport
	// that signals to it), "on" or "off".
	Mode string `mapstructure:"mode" yaml:"mode" json:"mode"`
	// Groups is the multicast forwarding table's size per ToR, one entry
	// per connection whose sender is below it (seed 004 §5.1: entries grow
	// with active connections; 4096 is a few thousand QPs per rack). A
	// create beyond it is refused and counted.
	Groups int `mapstructure:"groups" yaml:"groups" json:"groups"`
	// IdleTimeout ages out a group that no signal refreshed for this long
	// (Go duration): what reclaims the entry of a connection whose delete
	// was lost (seed §3.1.2). 1ms is hundreds of leaf-spine RTTs.
	IdleTimeout string `mapstructure:"idleTimeout" yaml:"idleTimeout" json:"idleTimeout"`
	// DedupEntries bounds the receiver ToR's table of (group, PSN) seen,
	// oldest evicted first.
	DedupEntries int `mapstructure:"dedupEntries" yaml:"dedupEntries" json:"dedupEntries"`
	// DedupWindow is how long after an FReTx's first copy later copies
	// are dropped as duplicates (Go duration): longer than the copies'
	// spread over the fast paths, shorter than the next repair of the
	// same PSN.
	DedupWindow string `mapstructure:"dedupWindow" yaml:"dedupWindow" json:"dedupWindow"`
}

// Modes of fabric.torMulticast.mode.
const (
	TorMulticastAuto = "auto"
	TorMulticastOn   = "on"
	TorMulticastOff  = "off"
	// TorMulticastAutoKind is the transport.kind that mode auto switches
	// the programmable ToRs on for.
	TorMulticastAutoKind = "orderre"
)

// QueueConfig configures an egress port queue.
type QueueConfig struct {
	// BufferBytes is the per egress port buffer; must be ≥ 2*MTU.
	BufferBytes int        `mapstructure:"bufferBytes" yaml:"bufferBytes" json:"bufferBytes"`
	ECN         ECNConfig  `mapstructure:"ecn" yaml:"ecn" json:"ecn"`
	Trim        TrimConfig `mapstructure:"trim" yaml:"trim" json:"trim"`
	PFC         PFCConfig  `mapstructure:"pfc" yaml:"pfc" json:"pfc"`
}

// ECNConfig is RED-style ECN marking on queue depth: no marking below
// Kmin, probability rising linearly to Pmax at Kmax, always above. The
// thresholds come from Preset, resolved per port (Thresholds): a
// reference's values, scaled with the port's rate where it scales them,
// or with preset custom the explicit KminBytes, KmaxBytes and Pmax.
type ECNConfig struct {
	// Enabled turns marking on at fabric-facing ports (and host-facing
	// ones with LastHop); NIC ports never mark.
	Enabled bool `mapstructure:"enabled" yaml:"enabled" json:"enabled"`
	// Preset names the thresholds' reference: "auto" (the default: each
	// transport's own, htsim for MRC and the mprdma kinds, dcqcn-sigcomm15 for RoCE),
	// "dcqcn-sigcomm15" (5 KB / 200 KB / 0.01), "hpcc" (4 / 16 KB per Gb/s of the
	// port, 0.2), "htsim" (0.2 / 0.8 BDP of the port, 1), "seed002" (100
	// KB / 200 KB / 0.5) or "custom" (the three fields below). Giving
	// any of those fields without naming a preset in the same file or
	// --set list means custom (Load).
	Preset string `mapstructure:"preset" yaml:"preset" json:"preset"`
	// KminBytes is, with preset custom, the class queue depth at enqueue
	// at or below which nothing is marked; 0 with any other preset.
	KminBytes int `mapstructure:"kminBytes" yaml:"kminBytes" json:"kminBytes"`
	// KmaxBytes is, with preset custom, the depth above which every
	// packet is marked; 0 with any other preset.
	KmaxBytes int `mapstructure:"kmaxBytes" yaml:"kmaxBytes" json:"kmaxBytes"`
	// Pmax is, with preset custom, the marking probability at KmaxBytes;
	// 0 with any other preset.
	Pmax float64 `mapstructure:"pmax" yaml:"pmax" json:"pmax"`
	// LastHop enables marking on ports facing hosts too.
	LastHop bool `mapstructure:"lastHop" yaml:"lastHop" json:"lastHop"`
}

// TrimConfig is packet trimming: a packet that does not fit the buffer is
// cut to SizeBytes and forwarded instead of dropped.
type TrimConfig struct {
	// Enabled turns trimming on at fabric- and host-facing ports (NIC
	// ports never trim).
	Enabled bool `mapstructure:"enabled" yaml:"enabled" json:"enabled"`
	// SizeBytes is what a trimmed packet keeps (its headers): PROTOCOLS.md's
	// TRIM_SIZE, 128 B by default.
	SizeBytes int `mapstructure:"sizeBytes" yaml:"sizeBytes" json:"sizeBytes"`
}

// PFCConfig is 802.1Qbb priority flow control.
type PFCConfig struct {
	// Enabled turns PFC on at every port for Priorities.
	Enabled bool `mapstructure:"enabled" yaml:"enabled" json:"enabled"`
	// Priorities are the lossless priorities, each 0..7, no duplicates.
	Priorities []int `mapstructure:"priorities" yaml:"priorities" json:"priorities"`
	// Mode is "static" (XoffBytes / XonBytes) or "dynamic": HPCC's switch
	// MMU (switch-mmu.cc), where a switch-wide shared buffer's free part
	// >> shift is the pause threshold (shift 3 at the host link rate, one
	// less per doubling of the port's rate), with a 4 KB reserve per
	// (port, priority), resume 3 KB under the threshold and the headroom
	// per port as below.
	Mode string `mapstructure:"mode" yaml:"mode" json:"mode"`
	// SharedBufferBytes is the switch's shared buffer in dynamic mode; 0
	// means the sum of its egress port buffers (ports × bufferBytes).
	SharedBufferBytes int `mapstructure:"sharedBufferBytes" yaml:"sharedBufferBytes" json:"sharedBufferBytes"`
	// XoffBytes is, in static mode, the bytes of a lossless class held for
	// one ingress port at which that port's upstream is paused (a PAUSE
	// frame for the class).
	XoffBytes int `mapstructure:"xoffBytes" yaml:"xoffBytes" json:"xoffBytes"`
	// XonBytes is, in static mode, the level at or below which it is
	// resumed.
	XonBytes int `mapstructure:"xonBytes" yaml:"xonBytes" json:"xonBytes"`
	// HeadroomBytes is reserved above Xoff; 0 means 3 × rate × delay
	// (see PFCConfig.Headroom).
	HeadroomBytes int               `mapstructure:"headroomBytes" yaml:"headroomBytes" json:"headroomBytes"`
	Watchdog      PFCWatchdogConfig `mapstructure:"watchdog" yaml:"watchdog" json:"watchdog"`
}

// PFCWatchdogConfig is the PFC storm watchdog.
type PFCWatchdogConfig struct {
	// Enabled turns the storm watchdog on (it acts only where PFC is on).
	Enabled bool `mapstructure:"enabled" yaml:"enabled" json:"enabled"`
	// Detection is how long a queue may stay paused before the watchdog fires.
	Detection string `mapstructure:"detection" yaml:"detection" json:"detection"`
	// Restoration is how long the watchdog action lasts; "" means 2×Detection.
	Restoration string `mapstructure:"restoration" yaml:"restoration" json:"restoration"`
	// Action is "drop", "forward" or "alert".
	Action string `mapstructure:"action" yaml:"action" json:"action"`
}

// HostConfig configures the simulated hosts.
type HostConfig struct {
	// TCP gives every host a TCP/IP stack (gvisor netstack) next to the transport.
	TCP bool `mapstructure:"tcp" yaml:"tcp" json:"tcp"`
	// Netstack gives every host a gVisor netstack (IPv6, UDP, ICMPv6): ping
	// and anything above IP need it. The RDMA path (the NIC's engine and the
	// transports) does not: false builds bare NICs, for runs of 10^5 hosts.
	// host.tcp needs it.
	Netstack bool `mapstructure:"netstack" yaml:"netstack" json:"netstack"`
	// NICTxLatency is the NIC's transmit latency (Go duration), 0..100µs:
	// from the post of a work request to the NIC taking it (doorbell, WQE
	// fetch, DMA), so its first packet leaves this much later. Packets the
	// transport sends on its own (ACKs, NACKs, retransmissions) are not
	// delayed.
	NICTxLatency string `mapstructure:"nicTxLatency" yaml:"nicTxLatency" json:"nicTxLatency"`
	// NICRxLatency is the NIC's receive latency (Go duration), 0..100µs:
	// from the transport completing a message (the last packet of a
	// WriteImm placed, the ACK that completes a request) to the
	// completion being visible to the application. Per-packet ACK/NACK
	// generation and the transport's reaction to ACKs are not delayed.
	NICRxLatency string `mapstructure:"nicRxLatency" yaml:"nicRxLatency" json:"nicRxLatency"`
}

// TransportConfig selects the RDMA transport.
type TransportConfig struct {
	// Kind is "mrc", "roce", or one of the multipath RDMA kinds "mprdma",
	// "random" and "orderre" (package mprdma; they need fabric.forwarding
	// ecmp, static or pathquality).
	Kind string `mapstructure:"kind" yaml:"kind" json:"kind"`
	// QPsPerConnection is how many QPs connect each pair of hosts that
	// talk (RoCE spreads them over planes and ECMP paths); 1..64.
	QPsPerConnection int `mapstructure:"qpsPerConnection" yaml:"qpsPerConnection" json:"qpsPerConnection"`
	// Payload is "real" (bytes are carried and placed: integrity checks
	// work) or "elided" (headers only, lengths accounted: large runs).
	Payload string `mapstructure:"payload" yaml:"payload" json:"payload"`
	// The transports' own sections, one per kind that has knobs, keyed by
	// the kind's name: each type is its transport's and implements Section
	// (see TransportKinds).
	MRC  mrc.Settings  `mapstructure:"mrc" yaml:"mrc" json:"mrc"`
	RoCE roce.Settings `mapstructure:"roce" yaml:"roce" json:"roce"`
	// MPRDMA is shared by the kinds mprdma, random and orderre
	// (SharedSection); OrderRE is orderre's own.
	MPRDMA  mprdma.Settings        `mapstructure:"mprdma" yaml:"mprdma" json:"mprdma"`
	OrderRE mprdma.OrderRESettings `mapstructure:"orderre" yaml:"orderre" json:"orderre"`
}

// The transports' sections, under the names they had when config
// declared them.
type (
	MRCTransportConfig  = mrc.Settings
	MRCResponderConfig  = mrc.ResponderSettings
	RoCETransportConfig = roce.Settings
)

// RoCE congestion-control presets: package roce's names, in its order
// (roce.Presets).
var RoCECCPresets = roce.Presets()

// RoCERenamedCCPresets are the RoCE preset names that were given up, each
// with what it meant and its successor: refused, so that an old name never
// silently means another preset (roce.RenamedPresets).
var RoCERenamedCCPresets = roce.RenamedPresets()

// RunConfig controls the run.
type RunConfig struct {
	// Pacing is "simulated" (as fast as possible) or "realtime".
	Pacing string `mapstructure:"pacing" yaml:"pacing" json:"pacing"`
	// Duration is the simulated time to run (Go duration, > 0).
	Duration string `mapstructure:"duration" yaml:"duration" json:"duration"`
	// RealtimeSlowdown stretches simulated time in realtime pacing, ≥ 1.
	RealtimeSlowdown float64 `mapstructure:"realtimeSlowdown" yaml:"realtimeSlowdown" json:"realtimeSlowdown"`
}

// Packet capture formats (output.pcapFormat).
const (
	PcapFormatNG      = "pcapng" // one file; an interface per port, directions
	PcapFormatClassic = "pcap"   // one classic file per port
)

// Packet capture bounds and defaults (output.pcap*).
const (
	DefaultPcapMaxPackets = 1_000_000
	MaxPcapMaxPackets     = 100_000_000
	// DefaultPcapSnaplen keeps every header of every frame vcluster puts
	// on the wire: the deepest stacks are 154 bytes — an MRC SACK
	// (Ethernet 14, outer uSID IPv6 40, IPv6 40, UDP 8, BTH 12, SETH 28,
	// CC_STATE 8, ICRC 4) and a netstack TCP segment with 40 bytes of
	// options in uSID encapsulation (14 + 40 + 40 + 60); an MRC data
	// header is at most 142, RoCE's shorter — with the first hundred
	// bytes of payload besides.
	DefaultPcapSnaplen = 256
	MinPcapSnaplen     = 64
	MaxPcapSnaplen     = 65535
)

// OutputConfig controls where results go.
type OutputConfig struct {
	// Dir is the output directory.
	Dir string `mapstructure:"dir" yaml:"dir" json:"dir"`
	// Pcap lists the ports to capture, by name: host NIC ports
	// h<host>/p<plane>; switch ports p<plane>.t0.<i>/<port> and
	// p<plane>.t1.<i>/<port> in a Clos, edge.<pod>.<i>/<port>,
	// agg.<pod>.<i>/<port> and core.<i>/<port> in a fat-tree. Validate
	// checks each against the fabric (CheckCapturePorts).
	Pcap []string `mapstructure:"pcap" yaml:"pcap" json:"pcap"`
	// PcapFormat is "pcapng" (one file, an interface per captured port,
	// each frame's direction) or "pcap" (one classic file per port).
	PcapFormat string `mapstructure:"pcapFormat" yaml:"pcapFormat" json:"pcapFormat"`
	// PcapMaxPackets bounds the frames a whole run writes, every port and
	// cluster together, 1..100 000 000: past it frames are counted, not
	// written, so a capture cannot fill the disk.
	PcapMaxPackets int `mapstructure:"pcapMaxPackets" yaml:"pcapMaxPackets" json:"pcapMaxPackets"`
	// PcapSnaplen is the most bytes kept of each frame: 0 (whole frames)
	// or 64..65535. The default, 256, keeps every header (see
	// DefaultPcapSnaplen).
	PcapSnaplen int `mapstructure:"pcapSnaplen" yaml:"pcapSnaplen" json:"pcapSnaplen"`
}

// Default returns the documented defaults: a 4-plane clos of 4 T0 × 4
// hosts and 4 T1 per plane, 100G links with 1us delays, uSID forwarding,
// the MRC transport, simulated pacing for 10ms, seed 1. The result is
// normalized and valid.
func Default() Config {
	c := Config{
		Seed: 1,
		Fabric: FabricConfig{
			Topology:          TopologyClos,
			Preset:            "",
			Planes:            4,
			HostsPerT0:        4,
			T0PerPlane:        4,
			T1PerPlane:        4,
			K:                 0,
			HostLinkSpeed:     defaultSpeed,
			FabricLinkSpeed:   defaultSpeed,
			HostLinkDelay:     defaultDelay,
			FabricLinkDelay:   defaultDelay,
			SwitchLatency:     "0s",
			ECMPReconvergence: "",
			MTU:               4200,
			Forwarding:        ForwardingUSID,
			ECMPSeed:          0,
			IFGBytes:          20,
			Queue: QueueConfig{
				BufferBytes: DefaultBuffer,
				ECN: ECNConfig{
					Enabled:   true,
					Preset:    ECNAuto,
					KminBytes: 0,
					KmaxBytes: 0,
					Pmax:      0,
					LastHop:   false,
				},
				Trim: TrimConfig{Enabled: true, SizeBytes: 128},
				PFC: PFCConfig{
					Enabled:           false,
					Priorities:        []int{3},
					Mode:              PFCStatic,
					SharedBufferBytes: 0,
					XoffBytes:         96000,
					XonBytes:          48000,
					HeadroomBytes:     0,
					Watchdog: PFCWatchdogConfig{
						Enabled:     true,
						Detection:   defaultDetect.String(),
						Restoration: (2 * defaultDetect).String(),
						Action:      WatchdogDrop,
					},
				},
			},
			TorMulticast: TorMulticastConfig{
				Mode:         TorMulticastAuto,
				Groups:       fabric.DefaultTorGroups,
				IdleTimeout:  "1ms",
				DedupEntries: fabric.DefaultTorDedupEntries,
				DedupWindow:  "100us",
			},
			PathQuality: defaultPathQuality(),
		},
		Host:      HostConfig{TCP: false, Netstack: true, NICTxLatency: "0s", NICRxLatency: "0s"},
		Transport: TransportConfig{Kind: TransportMRC, QPsPerConnection: 1, Payload: PayloadReal},
		Run: RunConfig{
			Pacing:           PacingSimulated,
			Duration:         "10ms",
			RealtimeSlowdown: 1,
		},
		Output: OutputConfig{Dir: "out", Pcap: []string{}, PcapFormat: PcapFormatNG,
			PcapMaxPackets: DefaultPcapMaxPackets, PcapSnaplen: DefaultPcapSnaplen},
	}
	c.Transport.setSectionDefaults()
	c.Normalize()
	return c
}

// Normalize fills derived fields whose value is zero, and clears fields the
// chosen topology does not use. It never overrides a non-zero value and
// does not validate; values it cannot derive are left zero for Validate to
// report.
//
//   - clos: K = 0; T0PerPlane = Hosts/HostsPerT0 when T0PerPlane is 0,
//     Hosts divides exactly and the quotient is at most MaxSwitchDim;
//     Hosts = HostsPerT0*T0PerPlane when Hosts is 0.
//   - fattree: HostsPerT0 = T0PerPlane = T1PerPlane = 0 (the shape follows
//     from K); Planes = 1 when 0; Hosts = K^3/4 when 0 and K is valid.
//   - PFC watchdog: Restoration = 2×Detection when "" and Detection parses.
func (c *Config) Normalize() {
	f := &c.Fabric
	switch f.Topology {
	case TopologyClos:
		f.K = 0
		// A T0 count beyond the limit is not derived: Validate then names
		// fabric.hosts, the field the user set, not fabric.t0PerPlane.
		if f.T0PerPlane == 0 && f.Hosts > 0 && f.HostsPerT0 > 0 && f.Hosts%f.HostsPerT0 == 0 && f.Hosts/f.HostsPerT0 <= MaxSwitchDim {
			f.T0PerPlane = f.Hosts / f.HostsPerT0
		}
		if f.Hosts == 0 && f.HostsPerT0 > 0 && f.T0PerPlane > 0 {
			f.Hosts = f.HostsPerT0 * f.T0PerPlane
		}
	case TopologyFatTree:
		f.HostsPerT0, f.T0PerPlane, f.T1PerPlane = 0, 0, 0
		if f.Planes == 0 {
			f.Planes = 1
		}
		if f.Hosts == 0 && validK(f.K) {
			f.Hosts = f.K * f.K * f.K / 4
		}
	}
	if f.Queue.PFC.Priorities == nil {
		f.Queue.PFC.Priorities = []int{}
	}
	w := &f.Queue.PFC.Watchdog
	if w.Restoration == "" {
		if d, err := time.ParseDuration(w.Detection); err == nil && d > 0 {
			w.Restoration = (2 * d).String()
		}
	}
	if c.Output.Pcap == nil {
		c.Output.Pcap = []string{}
	}
}

func validK(k int) bool { return k >= MinFatTreeK && k <= MaxFatTreeK && k%2 == 0 }

// YAML renders the config as YAML with the same keys Load reads, e.g. for
// writing the resolved config of a run next to its manifest. Loading the
// output again yields the same Config.
func (c Config) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: marshal yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal yaml: %w", err)
	}
	return buf.Bytes(), nil
}

// TorMulticastEnabled reports whether the programmable ToRs are on:
// mode on, or auto with transport.kind orderre.
func (c Config) TorMulticastEnabled() bool {
	switch c.Fabric.TorMulticast.Mode {
	case TorMulticastOn:
		return true
	case TorMulticastAuto:
		return c.Transport.Kind == TorMulticastAutoKind
	}
	return false
}

// Fabric returns the fabric's view of t (durations parsed; 0 for one that
// does not parse). Call it on a validated config.
func (t TorMulticastConfig) Fabric() fabric.TorMulticastConfig {
	return fabric.TorMulticastConfig{Groups: t.Groups, IdleTimeout: durationOrZero(t.IdleTimeout),
		DedupEntries: t.DedupEntries, DedupWindow: durationOrZero(t.DedupWindow)}
}

// HostLinkBps is HostLinkSpeed in bits/s, or 0 if it does not parse.
// Call it on a validated config.
func (f FabricConfig) HostLinkBps() uint64 { return speedOrZero(f.HostLinkSpeed) }

// FabricLinkBps is FabricLinkSpeed in bits/s, or 0 if it does not parse.
// Call it on a validated config.
func (f FabricConfig) FabricLinkBps() uint64 { return speedOrZero(f.FabricLinkSpeed) }

// HostLinkPropDelay is HostLinkDelay parsed, or 0 if it does not parse.
func (f FabricConfig) HostLinkPropDelay() time.Duration { return durationOrZero(f.HostLinkDelay) }

// FabricLinkPropDelay is FabricLinkDelay parsed, or 0 if it does not parse.
func (f FabricConfig) FabricLinkPropDelay() time.Duration {
	return durationOrZero(f.FabricLinkDelay)
}

// SwitchPipeline is SwitchLatency parsed, or 0 if it does not parse.
func (f FabricConfig) SwitchPipeline() time.Duration { return durationOrZero(f.SwitchLatency) }

// Reconvergence is ECMPReconvergence parsed, and false when it is ""
// (never reconverge) or does not parse.
func (f FabricConfig) Reconvergence() (time.Duration, bool) {
	if f.ECMPReconvergence == "" {
		return 0, false
	}
	d, err := time.ParseDuration(f.ECMPReconvergence)
	return d, err == nil
}

// NICLatencies are NICTxLatency and NICRxLatency parsed (0 for one that
// does not parse).
func (h HostConfig) NICLatencies() (tx, rx time.Duration) {
	return durationOrZero(h.NICTxLatency), durationOrZero(h.NICRxLatency)
}

// FatTreeShape returns the k-ary fat-tree switch counts: edge (= T0) and
// aggregation switches in total (k^2/2 each), core switches ((k/2)^2) and
// hosts per edge switch (k/2). Zero for a topology other than fattree.
func (f FabricConfig) FatTreeShape() (edge, agg, core, hostsPerEdge int) {
	if f.Topology != TopologyFatTree || !validK(f.K) {
		return 0, 0, 0, 0
	}
	k := f.K
	return k * k / 2, k * k / 2, (k / 2) * (k / 2), k / 2
}

// DetectionTime is Detection parsed, or 0 if it does not parse.
func (w PFCWatchdogConfig) DetectionTime() time.Duration { return durationOrZero(w.Detection) }

// RestorationTime is Restoration parsed (2×Detection when empty), or 0.
func (w PFCWatchdogConfig) RestorationTime() time.Duration {
	if w.Restoration == "" {
		return 2 * w.DetectionTime()
	}
	return durationOrZero(w.Restoration)
}

// Headroom returns the PFC headroom in bytes for a link of rateBps and
// one-way delay (propagation plus the sending switch's forwarding latency,
// fabric.switchLatency): HeadroomBytes when set, otherwise
// ceil(3 × rate × delay / 8).
func (p PFCConfig) Headroom(rateBps uint64, delay time.Duration) int {
	if p.HeadroomBytes > 0 {
		return p.HeadroomBytes
	}
	if delay <= 0 || rateBps == 0 {
		return 0
	}
	// 3 × rate[b/s] × delay[ns] / 8e9 bytes, in float to avoid overflow of
	// rate×ns (1.6e12 × 1e9 > 2^64); exact enough for a buffer size.
	bytes := 3 * float64(rateBps) * delay.Seconds() / 8
	n := int(bytes)
	if float64(n) < bytes {
		n++
	}
	return n
}

// RunDuration is Duration parsed, or 0 if it does not parse.
func (r RunConfig) RunDuration() time.Duration { return durationOrZero(r.Duration) }

func speedOrZero(s string) uint64 {
	v, err := unit.ParseSpeed(s)
	if err != nil {
		return 0
	}
	return v
}

func durationOrZero(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d
}
