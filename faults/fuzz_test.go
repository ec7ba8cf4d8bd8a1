package faults

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// Fuzz targets of the plan parsers and Clustermapper's probe-frame check
// (scripts/fuzz-short runs each for a few seconds). The fabric they
// resolve against is built once, tiny: an execution costs a parse and a
// lookup, not a topology.

var fuzzTopo struct {
	once sync.Once
	topo *fabric.Topology
}

func tinyTopo(t testing.TB) *fabric.Topology {
	fuzzTopo.once.Do(func() { fuzzTopo.topo = closTopo(t, 2, 2, 2, 2) })
	return fuzzTopo.topo
}

// seedPlans are valid plans of every kind and selector type, and a few
// bad ones, so the fuzzer starts inside the parser's real paths.
func seedPlans() []string {
	seeds := []string{`seed: 7
events:
  - name: cut an active uplink
    at: 300us
    duration: 2ms
    kind: link_down
    target: link:p1.t0.0-p1.t1.1
  - at: 1ms
    duration: 50ms
    kind: link_flap
    target: random:t0-t1,plane=1
    params: {period: 10ms, down: 2ms, jitter: 1ms}
  - at: 5ms
    kind: loss
    target: link:p0.t0.1-p0.t1.1
    params: {rate: 1%, model: gilbert, burst: 4, direction: reverse}
  - {at: 5ms, duration: 10ms, kind: degrade, target: "link:p0.t0.1-p0.t1.0", params: {loss: 0.5%, delay: 2us, direction: forward}}
  - {at: 6ms, duration: 1ms, kind: bit_errors, target: "port:p0.t0.0/*", params: {ber: 1e-6}}
  - {at: 6ms, duration: 1ms, kind: latency, target: "link:h1/p0", params: {delay: 5us}}
  - {at: 8ms, kind: switch_reboot, target: "switch:p1.t1.*", params: {boot: 3ms}}
  - {at: 8ms, duration: 1ms, kind: switch_down, target: "random:switch,tier=1,plane=0"}
  - {at: 8ms, duration: 1ms, kind: optics, target: "osfp:h0"}
  - {at: 8ms, duration: 1ms, kind: optics, target: "osfp:p0.t0.0/0"}
  - {at: 8ms, duration: 1ms, kind: plane_down, target: "plane:1"}
  - {at: 8ms, duration: 1ms, kind: nic_down, target: "nic:h2"}
  - {at: 8ms, duration: 1ms, kind: nic_down, target: "random:nic,plane=1"}
  - {at: 9ms, duration: 1ms, kind: pfc_storm, target: "nic:h3/p0", params: {class: 3, quanta: 65535, interval: 5us}}
  - {at: 9ms, duration: 1ms, kind: black_hole, target: "switch:p0.t1.0", params: {usid: p0.t0.1, fraction: 0.3}}
  - {at: 9ms, duration: 1ms, kind: black_hole, target: "switch:p0.t1.1", params: {usid: "host:h1/p0"}}
  - {at: 10ms, kind: link_down, target: "busiest:t0-t1,plane=0"}
`,
		"events: []\n",
		"",
		"events:\n  - at: 1ms\n    at: 2ms\n    kind: meteor\n    target: wire:x\n    params: {rate: NaN, rate: .inf}\n",
		"events:\n  - {at: 1ms, kind: link_flap, target: \"link:p0.t0.0/2\", params: {period: 1ns, count: 2000000000}}\n",
		"events:\n  - {at: 0, kind: pfc_storm, target: \"nic:h0/p1\", params: {interval: 0s}}\n",
		"seed: 0x10\nevents: [{at: 1ms, kind: switch_reboot, target: \"switch:p0.t0.0\", duration: 1ms, params: {boot: 2ms}}]\n",
		"events:\n  - &a {at: 1ms, kind: link_down, target: \"link:h0/p0\"}\n  - *a\n",
	}
	for _, name := range ScenarioNames() {
		y := strings.ReplaceAll(Scenarios[name], "{at}", "1ms")
		seeds = append(seeds, strings.ReplaceAll(y, "{dur}", "2ms"))
	}
	return seeds
}

// FuzzParsePlan: ParsePlan and Resolve never panic; every problem is a
// LineError (file:line); an accepted plan writes back (MarshalYAML) to a
// plan that parses again to the same events.
func FuzzParsePlan(f *testing.F) {
	for _, s := range seedPlans() {
		f.Add([]byte(s))
	}
	topo := tinyTopo(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePlan("fuzz.yaml", b)
		if p == nil {
			t.Fatalf("nil plan (err %v)", err)
		}
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T %v is not Errors", err, err)
			}
			for _, e := range es {
				if _, ok := e.(*LineError); !ok {
					t.Fatalf("problem %T %v has no line", e, e)
				}
			}
		}
		_, rerr := p.Resolve(topo, 1)
		if err != nil && rerr == nil {
			t.Fatalf("Resolve lost ParsePlan's problems: %v", err)
		}
		if err != nil {
			return
		}
		q, err := ParsePlan("again.yaml", []byte(p.MarshalYAML()))
		if err != nil {
			t.Fatalf("written plan does not parse: %v\n%s", err, p.MarshalYAML())
		}
		if len(q.Events) != len(p.Events) {
			t.Fatalf("%d events written, %d read back", len(p.Events), len(q.Events))
		}
		for i, ev := range p.Events {
			w := q.Events[i]
			if w.At != ev.At || w.Duration != ev.Duration || w.Kind != ev.Kind || w.Target != ev.Target || len(w.Params) != len(ev.Params) {
				t.Fatalf("event %d: wrote %+v, read %+v", i, ev, w)
			}
			for k, v := range ev.Params {
				if w.Params[k] != v {
					t.Fatalf("event %d params.%s: wrote %q, read %q", i, k, v, w.Params[k])
				}
			}
		}
	})
}

// FuzzParseSelector: ParseSelector never panics, a parsed selector
// prints back to itself, and resolving it against a fabric never panics.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"link:p1.t0.0-p1.t1.1", "link:p1.t1.1-p1.t0.0", "link:p1.t0.0/3", "link:h3/p1", "link:p1.t0.*-p1.t1.1",
		"link:h0-p0.t0.0", "port:p1.t0.0/*", "switch:p*.t1.0", "switch:p0.t0.[01]", "plane:1", "nic:h1/p0", "nic:h3", "osfp:p0.t0.0/0", "osfp:h1",
		"random:t0-t1", "random:t0-t1,plane=1", "random:nic,plane=0", "random:switch,tier=0,plane=1", "busiest:t0-t1,plane=1", "busiest:t1-t0", "random:t1-t0", "wire:x", "link:", ""} {
		f.Add(s)
	}
	topo := tinyTopo(f)
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			return
		}
		if again, err := ParseSelector(sel.String()); err != nil || again.String() != sel.String() {
			t.Fatalf("%q printed as %q, which parses to %q (%v)", s, sel.String(), again.String(), err)
		}
		r := newResolver(topo, sim.NewStream(1, "fuzz"))
		if tg, err := r.resolve(sel); err == nil && tg == nil {
			t.Fatalf("%q: no target and no error", s)
		}
	})
}

type countDev struct{ n int }

func (c *countDev) Ingress(p *fabric.Packet, in *fabric.Port) { c.n++ }

var fuzzMapper struct {
	once  sync.Once
	m     *Mapper
	seeds [][]byte
}

// FuzzMapperProbeCheck feeds frames to Clustermapper's tap: isProbe (the
// check of a received probe's bytes) and rx never panic; a frame the
// check refuses goes on to the NIC; one it accepts is consumed.
func FuzzMapperProbeCheck(f *testing.F) {
	fuzzMapper.once.Do(func() {
		topo := closTopo(f, 2, 2, 2, 2)
		m, err := NewMapper(topo, topo.Loop, MapperConfig{}, nil)
		if err != nil {
			f.Fatal(err)
		}
		m.Start()
		for _, a := range m.agents {
			m.round(a) // fill the probe slots (the events it schedules never run)
		}
		fuzzMapper.m = m
		for pl := 0; pl < topo.Planes; pl++ {
			for slot := 0; slot < 3; slot++ {
				addr := topo.HostAddr(0, pl)
				t0, port := topo.HostSubnet(0)
				path := fabric.USIDAddr(fabric.USID(pl, fabric.USIDT0, t0), fabric.HostPortUSID(pl, port))
				p := fabric.BuildFrame(topo.Pool, fabric.FrameSpec{Src: addr, Dst: addr, Outer: &path, Sport: probeSport,
					DSCP: fabric.DSCPControl, Payload: 64, Stored: -1, Seq: probeSeq(m.agents[0].round, pl, slot)})
				fuzzMapper.seeds = append(fuzzMapper.seeds, append([]byte(nil), p.Data...))
			}
		}
		if !m.isProbe(&fabric.Packet{Data: fuzzMapper.seeds[0]}) {
			f.Fatal("a real probe frame fails the probe check: the seeds reach nothing")
		}
		// Not a probe: inner source ≠ destination.
		p := fabric.BuildFrame(topo.Pool, fabric.FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(1, 0), Sport: probeSport, Payload: 64, Stored: -1})
		fuzzMapper.seeds = append(fuzzMapper.seeds, append([]byte(nil), p.Data...))
	})
	for _, s := range fuzzMapper.seeds {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Add([]byte{}, true)
	m := fuzzMapper.m
	f.Fuzz(func(t *testing.T, data []byte, tagged bool) {
		next := &countDev{}
		tp := &tap{m: m, host: 0, next: next}
		p := &fabric.Packet{Data: data}
		if tagged {
			p.TraceID = probeMagic
		}
		probe := tagged && m.isProbe(p)
		before := m.Received
		tp.Ingress(p, nil)
		if probe == (next.n == 1) {
			t.Fatalf("probe check %v, forwarded to the NIC %d times", probe, next.n)
		}
		if !probe && m.Received != before {
			t.Fatalf("a refused frame counted as a received probe")
		}
	})
}
