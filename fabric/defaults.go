package fabric

import "time"

// DefaultPortConfig returns the port settings vcluster uses when a config
// says nothing: 1 MiB buffer, 20 B preamble+IFG, RED/ECN at the DCQCN
// paper's 5 KB / 200 KB / 1 %, trimming to 128 B with a 64 KiB header queue, the default
// DSCP→class map, PFC off.
func DefaultPortConfig() *PortConfig {
	return &PortConfig{
		BufferBytes: 1 << 20,
		IFGBytes:    20,
		ECN:         ECNConfig{Enabled: true, Kmin: DefaultECNKmin, Kmax: DefaultECNKmax, Pmax: DefaultECNPmax},
		Trim:        TrimConfig{Enabled: true, Size: 128, QueueBytes: 64 << 10},
		Classes:     DefaultClassMap(),
	}
}

// DefaultOptions returns fabric options for mode with the default port
// settings; host-facing ports have ECN off (MRC's last hop), NIC ports
// neither mark nor trim.
func DefaultOptions(mode ForwardingMode) Options {
	fab := DefaultPortConfig()
	host := DefaultPortConfig()
	host.ECN.Enabled = false
	nic := DefaultPortConfig()
	nic.ECN.Enabled = false
	nic.Trim.Enabled = false
	return Options{Mode: mode, FabricPort: fab, HostFacingPort: host, NICPort: nic, MaxFrame: 9216}
}

// DefaultPFC returns PFC on class 3 with the thresholds vcluster uses by
// default and a SONiC-like watchdog (200 ms detection, 400 ms restoration,
// drop).
func DefaultPFC() *PFCConfig {
	return &PFCConfig{Enabled: true, Lossless: 1 << ClassRoCE, Xoff: 96000, Xon: 48000, Headroom: 64000,
		WatchdogOn: true, Detection: 200 * time.Millisecond, Restoration: 400 * time.Millisecond, WatchdogAct: WatchdogDrop}
}

// DynamicPFC is DefaultPFC with HPCC's dynamic threshold: 4 KB reserve
// per (port, class), 3 KB resume offset, the shared buffer the sum of the
// switch's port buffers, shift 3 at nicRate.
func DynamicPFC(nicRate uint64) *PFCConfig {
	p := DefaultPFC()
	p.Dynamic, p.Reserve, p.ResumeOffset, p.NICRate = true, 4<<10, 3<<10, nicRate
	return p
}

// WithPFC turns PFC on for every port role of o.
func (o Options) WithPFC(p *PFCConfig) Options {
	o.PFC = p
	for _, c := range []*PortConfig{o.FabricPort, o.HostFacingPort, o.NICPort} {
		c.PFC = p
	}
	return o
}
