package faults

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// Reliability is one component class's mean time between failures and
// mean time to repair (both exponential). Zero MTBF: never fails.
type Reliability struct {
	MTBF, MTTR time.Duration
}

// MTBFSpec draws "production" faults: every T0–T1 cable, every switch and
// every NIC port fails independently with its class's MTBF and is repaired
// after an exponential MTTR, over Horizon of virtual time. Real MTBFs are
// months and MTTRs hours (seed 001: a link repair takes hours, a switch
// replacement a day); a drill scales both down by the same factor so the
// ratio — the fraction of time a component is out — stays.
type MTBFSpec struct {
	Horizon                time.Duration
	FabricLinks, Switches  Reliability
	NICPorts               Reliability
	SwitchBoot             time.Duration // switch faults are reboots of this length when > 0
	GrayFraction, GrayLoss float64       // this fraction of link faults are gray (loss GrayLoss) instead of down
	MaxEvents              int           // cap (default 100 000)
}

// Generate draws a plan from spec on topo (Clos), deterministically from
// seed. Events are sorted by start.
func Generate(topo *fabric.Topology, seed uint64, spec MTBFSpec) (*Plan, error) {
	if topo.Kind != fabric.KindClos {
		return nil, fmt.Errorf("faults: the MTBF generator needs a Clos fabric")
	}
	if spec.MaxEvents == 0 {
		spec.MaxEvents = 100000
	}
	rng := sim.NewStream(seed, "faults/mtbf")
	exp := func(mean time.Duration) time.Duration {
		return time.Duration(-math.Log(1-rng.Float64()) * float64(mean))
	}
	p := &Plan{Seed: seed, Source: "generated"}
	add := func(ev *Event) error {
		if len(p.Events) >= spec.MaxEvents {
			return fmt.Errorf("faults: more than %d events; raise MaxEvents or the MTBFs", spec.MaxEvents)
		}
		sel, err := ParseSelector(ev.Target)
		if err != nil {
			return err
		}
		ev.sel = sel
		if ev.Params == nil {
			ev.Params = map[string]string{}
		}
		p.Events = append(p.Events, ev)
		return nil
	}
	draw := func(r Reliability, mk func(at, dur time.Duration) *Event) error {
		if r.MTBF <= 0 {
			return nil
		}
		for at := exp(r.MTBF); at < spec.Horizon; {
			dur := max(exp(r.MTTR), time.Microsecond)
			if err := add(mk(at, dur)); err != nil {
				return err
			}
			at += dur + exp(r.MTBF)
		}
		return nil
	}
	c := topo.Clos
	for pl := 0; pl < topo.Planes; pl++ {
		for t0 := 0; t0 < c.T0; t0++ {
			for t1 := 0; t1 < c.T1; t1++ {
				target := fmt.Sprintf("link:p%d.t0.%d-p%d.t1.%d", pl, t0, pl, t1)
				err := draw(spec.FabricLinks, func(at, dur time.Duration) *Event {
					if spec.GrayFraction > 0 && rng.Float64() < spec.GrayFraction {
						return &Event{At: at, Duration: dur, Kind: Loss, Target: target, Params: map[string]string{"rate": fmt.Sprint(spec.GrayLoss)}}
					}
					return &Event{At: at, Duration: dur, Kind: LinkDown, Target: target}
				})
				if err != nil {
					return nil, err
				}
			}
		}
	}
	for _, s := range topo.Switches {
		err := draw(spec.Switches, func(at, dur time.Duration) *Event {
			if spec.SwitchBoot > 0 {
				return &Event{At: at, Kind: SwitchReboot, Target: "switch:" + s.Name, Params: map[string]string{"boot": spec.SwitchBoot.String()}}
			}
			return &Event{At: at, Duration: dur, Kind: SwitchDown, Target: "switch:" + s.Name}
		})
		if err != nil {
			return nil, err
		}
	}
	for h := 0; h < topo.Hosts; h++ {
		for pl := 0; pl < topo.Planes; pl++ {
			target := fmt.Sprintf("nic:h%d/p%d", h, pl)
			if err := draw(spec.NICPorts, func(at, dur time.Duration) *Event {
				return &Event{At: at, Duration: dur, Kind: NICDown, Target: target}
			}); err != nil {
				return nil, err
			}
		}
	}
	sort.SliceStable(p.Events, func(i, j int) bool { return p.Events[i].At < p.Events[j].At })
	for i, ev := range p.Events {
		ev.Index = i
	}
	return p, nil
}

// Scenarios are named production patterns (seed 001), as plan YAML with
// {at} and {dur} for the start and the length.
var Scenarios = map[string]string{
	// A T1 reboots while the job runs: every path through it in one plane
	// is gone for the boot time, then its tables are back.
	"t1-reboot": `events:
  - name: T1 reboot during the job
    at: {at}
    kind: switch_reboot
    target: switch:p0.t1.0
    params: {boot: {dur}}
`,
	// Four transceivers flap for the duration (T9: "four links flap for a
	// minute", scaled): down 100 µs of every 500 µs, with jitter.
	"flapping-4": `events:
  - {name: flap 1, at: {at}, duration: {dur}, kind: link_flap, target: "random:t0-t1", params: {period: 500us, down: 100us, jitter: 100us}}
  - {name: flap 2, at: {at}, duration: {dur}, kind: link_flap, target: "random:t0-t1", params: {period: 500us, down: 100us, jitter: 100us}}
  - {name: flap 3, at: {at}, duration: {dur}, kind: link_flap, target: "random:t0-t1", params: {period: 500us, down: 100us, jitter: 100us}}
  - {name: flap 4, at: {at}, duration: {dur}, kind: link_flap, target: "random:t0-t1", params: {period: 500us, down: 100us, jitter: 100us}}
`,
	// A gray T0–T1 link: 1% loss, no alarm from the link itself.
	"gray-link": `events:
  - name: gray link at 1%
    at: {at}
    duration: {dur}
    kind: loss
    target: random:t0-t1
    params: {rate: 1%}
`,
	// A T0-side OSFP dies: one plane-port of each of 8 nodes.
	"osfp-8node": `events:
  - name: T0-side OSFP, 8 nodes
    at: {at}
    duration: {dur}
    kind: optics
    target: osfp:p0.t0.0/0
`,
	// A NIC-side OSFP dies: every plane of one NIC.
	"osfp-nic": `events:
  - name: NIC-side OSFP
    at: {at}
    duration: {dur}
    kind: optics
    target: osfp:h0
`,
}

// ScenarioNames lists the named scenarios.
func ScenarioNames() []string {
	var n []string
	for k := range Scenarios {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Scenario returns the named scenario's plan starting at at and lasting dur.
func Scenario(name string, at, dur time.Duration) (*Plan, error) {
	y, ok := Scenarios[name]
	if !ok {
		return nil, fmt.Errorf("faults: unknown scenario %q (want one of %v)", name, ScenarioNames())
	}
	y = strings.ReplaceAll(y, "{at}", at.String())
	y = strings.ReplaceAll(y, "{dur}", dur.String())
	return ParsePlan("scenario "+name, []byte(y))
}

// MarshalYAML writes the plan back as YAML (generated plans, for the
// record).
func (p *Plan) MarshalYAML() string {
	var b strings.Builder
	if p.Seed != 0 {
		fmt.Fprintf(&b, "seed: %d\n", p.Seed)
	}
	if len(p.Events) == 0 {
		b.WriteString("events: []\n")
	} else {
		b.WriteString("events:\n")
	}
	for _, ev := range p.Events {
		fmt.Fprintf(&b, "  - at: %v\n", ev.At)
		if ev.Duration > 0 {
			fmt.Fprintf(&b, "    duration: %v\n", ev.Duration)
		}
		fmt.Fprintf(&b, "    kind: %s\n    target: %q\n", ev.Kind, ev.Target)
		if len(ev.Params) > 0 {
			var ks []string
			for k := range ev.Params {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			b.WriteString("    params: {")
			for i, k := range ks {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s: %q", k, ev.Params[k])
			}
			b.WriteString("}\n")
		}
	}
	return b.String()
}
