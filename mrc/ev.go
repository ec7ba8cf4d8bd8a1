package mrc

import (
	"errors"
	"math/rand/v2"
)

// EVState is the state of one entropy value.
type EVState uint8

const (
	// EVGood: usable for data.
	EVGood EVState = iota
	// EVSkip: skipped once (ECN echo or trim): passed over at its next turn
	// in its plane's active-set scan, GOOD again at the rotation after
	// that; NIC-internal, GOOD to a controller.
	EVSkip
	// EVAssumedBad: a silent loss or the responder's ALWAYS_SKIP judged
	// its path failed; it is probed every ProbeInterval.
	EVAssumedBad
	// EVDenied: a controller forbade it.
	EVDenied
)

func (s EVState) String() string {
	return [...]string{"GOOD", "SKIP", "ASSUMED_BAD", "DENIED"}[s&3]
}

// EVInfo describes one EV of a QP (QP.EVStates).
type EVInfo struct {
	EV     uint32
	Plane  int
	Choice int // EV bits 4..13
	State  EVState
	Active bool // in its plane's active set
}

// The layout of endpoint.EV: bits 0..3 plane, 4..13 path choice, 14..15
// always set (the UDP source port EV & 0xffff is then in 0xC000..0xFFFF,
// never 0), 16..31 flow label.
const (
	// MaxPathChoices is the number of path choices an EV can name: Config.Validate
	// refuses a PathsPerPlane above it.
	MaxPathChoices = 1 << 10
	evPortBase     = 0xc000
	evChoiceMask   = (MaxPathChoices - 1) << 4
)

func evPlane(ev uint32) int  { return int(ev & 0xf) }
func evChoice(ev uint32) int { return int(ev&evChoiceMask) >> 4 }

// MakeEV builds an EV from plane, path choice (modulo MaxPathChoices) and
// flow label.
func MakeEV(plane, choice int, label uint16) uint32 {
	return uint32(plane)&0xf | uint32(choice)<<4&evChoiceMask | evPortBase | uint32(label)<<16
}

// EVCause says why an EV changed state (EVChange).
type EVCause uint8

const (
	CauseSackSkip   EVCause = iota // SACK M = SKIP_ONCE (ECN echo): GOOD → SKIP
	CauseTrim                      // NACK TRIMMED: GOOD → SKIP
	CauseAlwaysSkip                // SACK M = ALWAYS_SKIP: → ASSUMED_BAD
	CauseTimeout                   // ACK timeout of a packet on it: → ASSUMED_BAD
	CauseSilentLoss                // EVLossThreshold fast-loss detections: → ASSUMED_BAD
	CauseProbe                     // probe answered: ASSUMED_BAD → GOOD / SKIP
	CauseDeny                      // controller: DenyEV / DenyPath
	CauseAllow                     // controller: AllowEV / AllowPath
	numCauses
)

func (c EVCause) String() string {
	if c >= numCauses {
		return "unknown"
	}
	return [...]string{"sack-skip", "trim", "always-skip", "timeout", "silent-loss", "probe", "deny", "allow"}[c]
}

// EVChange is one EV state change (QP.PollEVChanges), for the
// controller's view (mrc_ctl.h: GOOD, ASSUMED_BAD, DENIED) and event logs.
// Only changes into or out of ASSUMED_BAD or DENIED are kept: SKIP exists
// only inside the NIC, so a transition the EVMinActive floor turned into
// SKIP instead of ASSUMED_BAD is not reported.
type EVChange struct {
	At       int64 // ns: the time of the input that caused it (DenyEV/AllowEV: the QP's latest input)
	EV       uint32
	Plane    int
	From, To EVState
	Cause    EVCause
}

// MaxEVChanges bounds the EV changes a QP keeps between PollEVChanges
// calls; beyond it they are dropped and counted (MRCStats.EVChangesDropped),
// so a storm of transitions nobody drains cannot grow memory.
const MaxEVChanges = 1024

// ErrUnknownEV is returned by the controller API for an EV not in the pool.
var ErrUnknownEV = errors.New("mrc: EV not in this QP's pool")

type evEntry struct {
	ev        uint32
	plane     uint8
	state     EVState
	active    bool
	losses    uint8 // consecutive silent losses (fast-loss rule)
	skipUntil int64
	nextProbe int64
	probeSeq  uint16
	// passed: the scan went past this EV while it was in SKIP, so it has
	// lost a turn and may return to GOOD at the next rotation.
	passed bool
}

type planeSet struct {
	first, n    int     // the plane's EVs: evs[first : first+n]
	active      []int32 // active set in scan order
	target      int     // desired active-set size
	cursor      int
	good        int // GOOD EVs in active
	up          bool
	lastShuffle int64
	rotations   uint64
}

// evPool is a QP's EV pool: per-plane active sets and backups, the state
// machine of every EV, and the per-packet choice. checkInvariants
// (invariants.go) states what its counts and active sets must satisfy.
type evPool struct {
	evs       []evEntry
	planes    []planeSet
	byEV      map[uint32]int32
	rng       *rand.Rand
	rr        int
	usable    int // GOOD + SKIP
	minActive int
	reshuffle int64
	skipDur   int64
	probeIvl  int64
	lossThr   uint8

	nBad        int
	nextProbeAt int64
	transitions uint64

	// changes are the EV changes not yet polled (at most MaxEVChanges);
	// clock is the latest input time, for changes from calls with none.
	changes        []EVChange
	changesDropped uint64
	clock          int64

	// structured is set when EVs name paths (PathsPerPlane > 0); then
	// pathBad counts the ASSUMED_BAD or DENIED EVs of each (plane, choice),
	// so a replacement avoids a path a sibling EV already found broken.
	structured bool
	pathBad    map[uint32]int
}

// pathKey names the path of an EV: its plane and choice bits.
func pathKey(ev uint32) uint32 { return ev & 0xffff }

func (p *evPool) init(cfg *Config, rng *rand.Rand) {
	P := cfg.Planes
	p.rng = rng
	p.minActive = cfg.EVMinActive
	p.reshuffle = cfg.ReshuffleInterval
	p.skipDur = cfg.SkipDuration
	p.probeIvl = cfg.ProbeInterval
	p.lossThr = uint8(cfg.EVLossThreshold)
	p.evs = make([]evEntry, 0, cfg.EVsPerQP)
	p.planes = make([]planeSet, P)
	p.byEV = make(map[uint32]int32, cfg.EVsPerQP)
	if cfg.PathsPerPlane > 0 {
		p.structured = true
		p.pathBad = make(map[uint32]int)
	}
	for pl := 0; pl < P; pl++ {
		n := cfg.EVsPerQP / P
		if pl < cfg.EVsPerQP%P {
			n++
		}
		ps := &p.planes[pl]
		ps.first, ps.n, ps.up = len(p.evs), n, true
		var choices []int
		if cfg.PathsPerPlane > 0 {
			// Beyond MaxPathChoices two choices would be one EV (and the
			// duplicate search below would never end).
			choices = rng.Perm(min(cfg.PathsPerPlane, MaxPathChoices))
		}
		for i := 0; i < n; i++ {
			var ev uint32
			for {
				if cfg.PathsPerPlane > 0 {
					// Structured: one EV per path; beyond PathsPerPlane, the
					// flow label tells duplicates of a path apart.
					ev = MakeEV(pl, choices[i%len(choices)], uint16(i/len(choices)))
				} else {
					ev = uint32(pl) | evPortBase | rng.Uint32()&^(0xf|evPortBase)
				}
				if _, dup := p.byEV[ev]; !dup {
					break
				}
			}
			p.byEV[ev] = int32(len(p.evs))
			p.evs = append(p.evs, evEntry{ev: ev, plane: uint8(pl)})
		}
		as := cfg.activeSetSize()
		t := as / P
		if pl < as%P {
			t++
		}
		if t > n {
			t = n
		}
		ps.target = t
		ps.active = make([]int32, 0, n)
		for i := 0; i < t; i++ {
			idx := int32(ps.first + i)
			ps.active = append(ps.active, idx)
			p.evs[idx].active = true
			ps.good++
		}
		rng.Shuffle(len(ps.active), func(a, b int) { ps.active[a], ps.active[b] = ps.active[b], ps.active[a] })
	}
	p.usable = len(p.evs)
}

func (p *evPool) lookup(ev uint32) int32 {
	if i, ok := p.byEV[ev]; ok {
		return i
	}
	return -1
}

func usableState(s EVState) bool { return s == EVGood || s == EVSkip }

// controllerVisible reports whether the controller sees an EV in state s as
// anything but GOOD (mrc_ctl.h has GOOD, ASSUMED_BAD and DENIED; SKIP is
// the NIC's own).
func controllerVisible(s EVState) bool { return s == EVAssumedBad || s == EVDenied }

// record keeps one EV change for PollEVChanges, or counts it as dropped.
func (p *evPool) record(now int64, i int32, from, to EVState, c EVCause) {
	if !controllerVisible(from) && !controllerVisible(to) {
		return // GOOD ⇄ SKIP: SKIP exists only inside the NIC (mrc_ctl.h)
	}
	if len(p.changes) >= MaxEVChanges {
		p.changesDropped++
		return
	}
	e := &p.evs[i]
	p.changes = append(p.changes, EVChange{At: now, EV: e.ev, Plane: int(e.plane), From: from, To: to, Cause: c})
}

// set moves EV i to state s at time now for cause c, keeping the active
// sets, counts and probe schedule in step. It reports whether the state
// changed.
func (p *evPool) set(i int32, s EVState, now int64, c EVCause) bool {
	e := &p.evs[i]
	old := e.state
	if old == s {
		return false
	}
	ps := &p.planes[e.plane]
	p.transitions++
	p.record(now, i, old, s, c)
	if usableState(old) && !usableState(s) {
		p.usable--
	} else if !usableState(old) && usableState(s) {
		p.usable++
	}
	if old == EVAssumedBad {
		p.nBad--
	}
	if p.structured {
		wasBad, isBad := old == EVAssumedBad || old == EVDenied, s == EVAssumedBad || s == EVDenied
		if wasBad != isBad {
			if isBad {
				p.pathBad[pathKey(e.ev)]++
			} else {
				p.pathBad[pathKey(e.ev)]--
			}
		}
	}
	if e.active && old == EVGood {
		ps.good--
	}
	e.state = s
	switch s {
	case EVGood, EVSkip:
		if s == EVSkip {
			e.skipUntil, e.passed = now+p.skipDur, false
		}
		e.losses = 0
		if e.active {
			if s == EVGood {
				ps.good++
			} else if p.skipDur > 0 {
				// Only GOOD EVs carry data: a SKIP that lasts (SkipDuration)
				// is benched for a GOOD backup of the same plane, if any.
				p.bench(ps, i, now)
			}
		} else if len(ps.active) < ps.target {
			p.activate(ps, i)
		}
	case EVAssumedBad, EVDenied:
		if s == EVAssumedBad {
			p.nBad++
			e.nextProbe = now + p.probeIvl
			if p.nBad == 1 || e.nextProbe < p.nextProbeAt {
				p.nextProbeAt = e.nextProbe
			}
		}
		if e.active {
			p.deactivate(ps, i)
		}
	}
	return true
}

// activate appends EV i to the end of the active set (it is scanned in this
// rotation if the cursor has not passed it).
func (p *evPool) activate(ps *planeSet, i int32) {
	e := &p.evs[i]
	e.active = true
	ps.active = append(ps.active, i)
	if e.state == EVGood {
		ps.good++
	}
}

// endSkip returns a SKIP EV whose turn is over to GOOD. The controller does
// not see SKIP, so the change is not recorded (record).
func (p *evPool) endSkip(e *evEntry) {
	e.state = EVGood
	p.transitions++
}

// bench swaps active SKIP EV i for a GOOD inactive EV of the same plane
// (one whose SKIP has ended counts as GOOD), if there is one.
func (p *evPool) bench(ps *planeSet, i int32, now int64) {
	pos := -1
	for k, j := range ps.active {
		if j == i {
			pos = k
			break
		}
	}
	if pos < 0 || ps.n == 0 {
		return
	}
	start := p.rng.IntN(ps.n)
	for k := 0; k < ps.n; k++ {
		r := int32(ps.first + (start+k)%ps.n)
		e := &p.evs[r]
		if e.active || p.structured && p.pathBad[pathKey(e.ev)] > 0 {
			continue
		}
		if e.state == EVSkip && e.skipUntil <= now {
			p.endSkip(e)
		}
		if e.state != EVGood {
			continue
		}
		p.evs[i].active = false
		e.active = true
		ps.active[pos] = r
		ps.good++
		return
	}
}

// deactivate removes EV i from the active set and promotes a usable EV from
// the same plane's backup pool into its slot.
func (p *evPool) deactivate(ps *planeSet, i int32) {
	p.evs[i].active = false
	pos := -1
	for k, j := range ps.active {
		if j == i {
			pos = k
			break
		}
	}
	if pos < 0 {
		return
	}
	if r := p.backup(ps); r >= 0 {
		p.evs[r].active = true
		ps.active[pos] = r
		if p.evs[r].state == EVGood {
			ps.good++
		}
		return
	}
	copy(ps.active[pos:], ps.active[pos+1:])
	ps.active = ps.active[:len(ps.active)-1]
	if pos < ps.cursor {
		ps.cursor--
	}
}

// backup returns a random usable inactive EV of plane ps, preferring GOOD
// ones, or -1. With structured EVs it never returns an EV whose path a
// sibling EV has found broken (ASSUMED_BAD or DENIED): both name the same
// links, so the active set rather shrinks until a probe revives the path.
func (p *evPool) backup(ps *planeSet) int32 {
	if ps.n == 0 {
		return -1
	}
	start := p.rng.IntN(ps.n)
	skip := int32(-1)
	for k := 0; k < ps.n; k++ {
		i := int32(ps.first + (start+k)%ps.n)
		e := &p.evs[i]
		if e.active {
			continue
		}
		if p.structured && p.pathBad[pathKey(e.ev)] > 0 {
			continue
		}
		if e.state == EVGood {
			return i
		}
		if e.state == EVSkip && skip < 0 {
			skip = i
		}
	}
	return skip
}

// markBad moves a usable EV to ASSUMED_BAD, unless that would leave fewer
// than EVMinActive usable EVs: then it goes to SKIP. It reports whether the
// EV became ASSUMED_BAD.
func (p *evPool) markBad(i int32, now int64, c EVCause) bool {
	e := &p.evs[i]
	if !usableState(e.state) {
		return false
	}
	if p.usable-1 < p.minActive {
		p.set(i, EVSkip, now, c)
		return false
	}
	return p.set(i, EVAssumedBad, now, c)
}

// skip moves a GOOD EV to SKIP.
func (p *evPool) skip(i int32, now int64, c EVCause) {
	if p.evs[i].state == EVGood {
		p.set(i, EVSkip, now, c)
	}
}

// feedback applies a SACK's path feedback (the spec's M) for EV i: SKIP_ONCE
// (the ECN echo) skips a GOOD EV once, ALWAYS_SKIP marks it bad.
func (p *evPool) feedback(i int32, m uint8, now int64) {
	switch m {
	case PathSkipOnce:
		p.skip(i, now, CauseSackSkip)
	case PathAlwaysSkip:
		p.markBad(i, now, CauseAlwaysSkip)
	}
}

// probeAnswered applies the answer to a probe of EV i: an ASSUMED_BAD EV
// is GOOD again, or SKIP when the answer echoes a CE mark (skipOnce).
func (p *evPool) probeAnswered(i int32, skipOnce bool, now int64) {
	if p.evs[i].state != EVAssumedBad {
		return
	}
	if skipOnce {
		p.set(i, EVSkip, now, CauseProbe)
	} else {
		p.set(i, EVGood, now, CauseProbe)
	}
}

// silentLoss counts a loss on EV i that no NACK reported (the fast-loss
// rule found it): EVLossThreshold in a row mark the EV bad.
func (p *evPool) silentLoss(i int32, now int64) {
	e := &p.evs[i]
	if e.losses < 255 {
		e.losses++
	}
	if e.losses >= p.lossThr {
		p.markBad(i, now, CauseSilentLoss)
	}
}

// delivered notes that a first transmission on EV i was acknowledged: its
// silent losses are no longer in a row.
func (p *evPool) delivered(i int32) { p.evs[i].losses = 0 }

// recomputeProbe recomputes the earliest probe time of ASSUMED_BAD EVs.
func (p *evPool) recomputeProbe() {
	first := true
	for k := range p.evs {
		e := &p.evs[k]
		if e.state == EVAssumedBad && (first || e.nextProbe < p.nextProbeAt) {
			p.nextProbeAt, first = e.nextProbe, false
		}
	}
}

// counts returns the number of EVs in each state and in the active sets.
func (p *evPool) counts() (c [4]int, active int) {
	for k := range p.evs {
		c[p.evs[k].state&3]++
	}
	for pl := range p.planes {
		active += len(p.planes[pl].active)
	}
	return
}
