package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is one problem with one config field. Its message is
//
//	<path>: <reason>, got <value>
//
// for example "fabric.planes: must be 1..16, got 0". Path is the dotted
// lowerCamel key as written in YAML or --set. String values are quoted. A
// nil Value omits the ", got" part (used for "unknown field").
//
// Validate and Load return a join (errors.Join) of *FieldError; use
// errors.As or the Unwrap() []error method to get at them.
type FieldError struct {
	Path   string
	Reason string
	Value  any
}

func (e *FieldError) Error() string {
	if e.Value == nil {
		return e.Path + ": " + e.Reason
	}
	return e.Path + ": " + e.Reason + ", got " + formatValue(e.Value)
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

type validator struct{ errs []error }

func (v *validator) add(path, reason string, value any) {
	v.errs = append(v.errs, &FieldError{Path: path, Reason: reason, Value: value})
}

func (v *validator) intRange(path string, x, lo, hi int) bool {
	if x < lo || x > hi {
		v.add(path, fmt.Sprintf("must be %d..%d", lo, hi), x)
		return false
	}
	return true
}

func (v *validator) oneOf(path, x string, allowed ...string) {
	if !slices.Contains(allowed, x) {
		q := make([]string, len(allowed))
		for i, a := range allowed {
			q[i] = strconv.Quote(a)
		}
		v.add(path, "must be one of "+strings.Join(q, ", "), x)
	}
}

func (v *validator) speed(path, s string) {
	bps, err := ParseSpeed(s)
	if err != nil {
		v.add(path, `must be a speed like "100G", "400Gbps" or "25000M"`, s)
		return
	}
	if bps == 0 || bps > MaxLinkBps {
		v.add(path, "must be > 0 and ≤ 1.6T", s)
	}
}

func (v *validator) delay(path, s string) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		v.add(path, `must be a Go duration like "500ns" or "1us"`, s)
	case d < 0:
		v.add(path, "must be ≥ 0", s)
	case d > MaxLinkDelay:
		v.add(path, "must be ≤ 1s", s)
	}
}

// positiveDuration checks a required duration > 0 and returns it.
func (v *validator) positiveDuration(path, s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		v.add(path, `must be a Go duration like "10ms"`, s)
		return 0, false
	case d <= 0:
		v.add(path, "must be > 0", s)
		return 0, false
	}
	return d, true
}

func (t *TransportConfig) validate(v *validator) {
	v.oneOf("transport.kind", t.Kind, TransportMRC, TransportRoCE)
	v.intRange("transport.qpsPerConnection", t.QPsPerConnection, 1, 64)
	v.oneOf("transport.payload", t.Payload, PayloadReal, PayloadElided)
	v.intRange("transport.mrc.evsPerQP", t.MRC.EVsPerQP, 128, 256)
	v.intRange("transport.mrc.mprUnits", t.MRC.MPRUnits, 1, 64)
	v.intRange("transport.mrc.maxWImm", t.MRC.MaxWImm, 1, 1024)
	v.intRange("transport.mrc.pmtu", t.MRC.PMTU, MinPMTU, MaxPMTU)
	if t.MRC.RTO != "" {
		v.positiveDuration("transport.mrc.rto", t.MRC.RTO)
	}
	v.oneOf("transport.roce.reliability", t.RoCE.Reliability, "gbn", "irn")
	v.oneOf("transport.roce.cc", t.RoCE.CC, RoCECCPresets...)
	if t.RoCE.Timeout != "" {
		v.positiveDuration("transport.roce.timeout", t.RoCE.Timeout)
	}
	v.intRange("transport.roce.retryCount", t.RoCE.RetryCount, 0, 7)
}

// Validate checks every field and returns all problems at once, joined with
// errors.Join, each a *FieldError. A nil result means the config is usable.
// Validate does not modify c; fields that Normalize derives may be zero
// (see Normalize).
func (c *Config) Validate() error {
	var v validator
	c.Fabric.validate(&v)
	c.Transport.validate(&v)
	c.Run.validate(&v)
	if c.Transport.Kind == TransportMRC && c.Fabric.MTU >= MinMTU && c.Transport.MRC.PMTU+MRCPacketOverhead > c.Fabric.MTU {
		v.add("transport.mrc.pmtu", fmt.Sprintf("must be ≤ fabric.mtu − %d (%d): a full MRC packet must fit the MTU",
			MRCPacketOverhead, c.Fabric.MTU-MRCPacketOverhead), c.Transport.MRC.PMTU)
	}
	if c.Host.TCP && !c.Host.Netstack {
		v.add("host.tcp", "needs host.netstack", c.Host.TCP)
	}
	if strings.TrimSpace(c.Output.Dir) == "" {
		v.add("output.dir", "must not be empty", c.Output.Dir)
	}
	return errors.Join(v.errs...)
}

func (f *FabricConfig) validate(v *validator) {
	v.oneOf("fabric.topology", f.Topology, TopologyClos, TopologyFatTree)
	if f.Preset != "" {
		if _, ok := presets[f.Preset]; !ok {
			v.add("fabric.preset", `must be "" or one of `+strings.Join(PresetNames(), ", "), f.Preset)
		}
	}
	switch f.Topology {
	case TopologyClos:
		f.validateClos(v)
	case TopologyFatTree:
		f.validateFatTree(v)
	}

	v.speed("fabric.hostLinkSpeed", f.HostLinkSpeed)
	v.speed("fabric.fabricLinkSpeed", f.FabricLinkSpeed)
	v.delay("fabric.hostLinkDelay", f.HostLinkDelay)
	v.delay("fabric.fabricLinkDelay", f.FabricLinkDelay)
	mtuOK := v.intRange("fabric.mtu", f.MTU, MinMTU, MaxMTU)
	v.oneOf("fabric.forwarding", f.Forwarding, ForwardingECMP, ForwardingUSID, ForwardingStatic)
	v.intRange("fabric.ifgBytes", f.IFGBytes, 0, MaxIFGBytes)
	f.Queue.validate(v, f.MTU, mtuOK)
}

func (f *FabricConfig) validateClos(v *validator) {
	v.intRange("fabric.planes", f.Planes, 1, MaxPlanes)
	hptOK := v.intRange("fabric.hostsPerT0", f.HostsPerT0, 1, MaxSwitchDim)
	if hptOK && f.Forwarding == ForwardingUSID && f.HostsPerT0 >= MaxSwitchDim {
		// Host-port uSIDs are port+1 in 10 bits (docs/addressing.md).
		v.add("fabric.hostsPerT0", fmt.Sprintf("must be ≤ %d with forwarding usid", MaxSwitchDim-1), f.HostsPerT0)
	}
	v.intRange("fabric.t1PerPlane", f.T1PerPlane, 1, MaxSwitchDim)
	if f.Hosts < 0 {
		v.add("fabric.hosts", "must be ≥ 0 (0 = hostsPerT0 × t0PerPlane)", f.Hosts)
		return
	}
	t0 := f.T0PerPlane
	if t0 == 0 && f.Hosts > 0 {
		// t0PerPlane derives from hosts.
		if !hptOK {
			return
		}
		if f.Hosts%f.HostsPerT0 != 0 {
			v.add("fabric.hosts", fmt.Sprintf("must be a multiple of fabric.hostsPerT0 (%d)", f.HostsPerT0), f.Hosts)
			return
		}
		t0 = f.Hosts / f.HostsPerT0
		if t0 > MaxSwitchDim {
			v.add("fabric.hosts", fmt.Sprintf("must be ≤ fabric.hostsPerT0 × %d (%d)", MaxSwitchDim, f.HostsPerT0*MaxSwitchDim), f.Hosts)
		}
		return
	}
	if !v.intRange("fabric.t0PerPlane", t0, 1, MaxSwitchDim) || !hptOK {
		return
	}
	if f.Hosts != 0 && f.Hosts != f.HostsPerT0*t0 {
		v.add("fabric.hosts", fmt.Sprintf("must equal fabric.hostsPerT0 × fabric.t0PerPlane (%d × %d = %d)",
			f.HostsPerT0, t0, f.HostsPerT0*t0), f.Hosts)
	}
}

func (f *FabricConfig) validateFatTree(v *validator) {
	if f.Planes != 0 && f.Planes != 1 {
		v.add("fabric.planes", "must be 1 for topology fattree", f.Planes)
	}
	if !validK(f.K) {
		v.add("fabric.k", fmt.Sprintf("must be an even number %d..%d for topology fattree", MinFatTreeK, MaxFatTreeK), f.K)
		return
	}
	if want := f.K * f.K * f.K / 4; f.Hosts != 0 && f.Hosts != want {
		v.add("fabric.hosts", fmt.Sprintf("must be k³/4 = %d for a k=%d fat-tree (or 0 to derive)", want, f.K), f.Hosts)
	}
	// The fat-tree has one link speed and delay throughout.
	if a, b := speedOrZero(f.HostLinkSpeed), speedOrZero(f.FabricLinkSpeed); a != 0 && b != 0 && a != b {
		v.add("fabric.fabricLinkSpeed", "must equal fabric.hostLinkSpeed for topology fattree (one link speed)", f.FabricLinkSpeed)
	}
	if a, b := f.HostLinkDelay, f.FabricLinkDelay; durationOrZero(a) != durationOrZero(b) {
		v.add("fabric.fabricLinkDelay", "must equal fabric.hostLinkDelay for topology fattree (one link delay)", b)
	}
	// The uSID plan has 10 bits of switch index per tier (docs/addressing.md).
	if f.Forwarding == ForwardingUSID && f.K*f.K/2 > 1024 {
		v.add("fabric.k", "must be ≤ 44 with forwarding usid (k²/2 edge switches must fit the uSID plan's 1024)", f.K)
	}
}

func (q *QueueConfig) validate(v *validator, mtu int, mtuOK bool) {
	switch {
	case q.BufferBytes <= 0:
		v.add("fabric.queue.bufferBytes", "must be > 0", q.BufferBytes)
	case mtuOK && q.BufferBytes < 2*mtu:
		v.add("fabric.queue.bufferBytes", fmt.Sprintf("must be ≥ 2 × fabric.mtu (%d)", 2*mtu), q.BufferBytes)
	}
	buf := q.BufferBytes

	if e := q.ECN; e.Enabled {
		switch {
		case e.KminBytes < 0:
			v.add("fabric.queue.ecn.kminBytes", "must be ≥ 0", e.KminBytes)
		case e.KminBytes >= e.KmaxBytes:
			v.add("fabric.queue.ecn.kminBytes", fmt.Sprintf("must be < fabric.queue.ecn.kmaxBytes (%d)", e.KmaxBytes), e.KminBytes)
		}
		if e.KmaxBytes > buf {
			v.add("fabric.queue.ecn.kmaxBytes", fmt.Sprintf("must be ≤ fabric.queue.bufferBytes (%d)", buf), e.KmaxBytes)
		}
		if !(e.Pmax > 0 && e.Pmax <= 1) { // also rejects NaN
			v.add("fabric.queue.ecn.pmax", "must be in (0, 1]", e.Pmax)
		}
	}

	if t := q.Trim; t.Enabled {
		v.intRange("fabric.queue.trim.sizeBytes", t.SizeBytes, MinTrimBytes, MaxTrimBytes)
	}

	if p := q.PFC; p.Enabled {
		if len(p.Priorities) == 0 {
			v.add("fabric.queue.pfc.priorities", fmt.Sprintf("must list at least one priority 0..%d", MaxPriority), p.Priorities)
		}
		seen := map[int]bool{}
		dup := false
		for i, pr := range p.Priorities {
			if pr < 0 || pr > MaxPriority {
				v.add(fmt.Sprintf("fabric.queue.pfc.priorities[%d]", i), fmt.Sprintf("must be 0..%d", MaxPriority), pr)
			}
			dup = dup || seen[pr]
			seen[pr] = true
		}
		if dup {
			v.add("fabric.queue.pfc.priorities", "must not list a priority twice", p.Priorities)
		}
		if p.XonBytes < 0 {
			v.add("fabric.queue.pfc.xonBytes", "must be ≥ 0", p.XonBytes)
		}
		if p.XoffBytes <= p.XonBytes {
			v.add("fabric.queue.pfc.xoffBytes", fmt.Sprintf("must be > fabric.queue.pfc.xonBytes (%d)", p.XonBytes), p.XoffBytes)
		}
		if p.XoffBytes >= buf {
			v.add("fabric.queue.pfc.xoffBytes", fmt.Sprintf("must be < fabric.queue.bufferBytes (%d)", buf), p.XoffBytes)
		}
		if p.HeadroomBytes < 0 {
			v.add("fabric.queue.pfc.headroomBytes", "must be ≥ 0 (0 = 3 × rate × delay)", p.HeadroomBytes)
		}
		if w := p.Watchdog; w.Enabled {
			v.positiveDuration("fabric.queue.pfc.watchdog.detection", w.Detection)
			if w.Restoration != "" {
				v.positiveDuration("fabric.queue.pfc.watchdog.restoration", w.Restoration)
			}
			v.oneOf("fabric.queue.pfc.watchdog.action", w.Action, WatchdogDrop, WatchdogForward, WatchdogAlert)
		}
	}
}

func (r *RunConfig) validate(v *validator) {
	v.oneOf("run.pacing", r.Pacing, PacingSimulated, PacingRealtime)
	v.positiveDuration("run.duration", r.Duration)
	if s := r.RealtimeSlowdown; !(s >= 1) || math.IsInf(s, 1) { // also rejects NaN
		v.add("run.realtimeSlowdown", "must be ≥ 1 and finite", s)
	}
}
