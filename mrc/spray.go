package mrc

// Spraying: the per-packet choice of an EV. Planes are visited round robin,
// each plane's active set is scanned in a pseudo-random order reshuffled
// every ReshuffleInterval, and a rotation of the scan is when SKIP ends
// (ev.go holds the EV states and their transitions).

// rotate starts a new rotation of plane ps's active set: SKIP EVs that have
// been passed over once and whose SkipDuration has passed return to GOOD,
// and the scan order is reshuffled when ReshuffleInterval has passed. (An
// EV skipped after its turn in this rotation stays SKIP for the next one:
// returning it now would skip nothing.)
func (p *evPool) rotate(ps *planeSet, now int64) {
	ps.cursor = 0
	ps.rotations++
	for _, i := range ps.active {
		e := &p.evs[i]
		if e.state == EVSkip && e.passed && e.skipUntil <= now {
			p.endSkip(e)
			ps.good++
		}
	}
	if p.skipDur > 0 {
		// Benched SKIP EVs (replaced by a GOOD backup) are GOOD backups
		// again once their SkipDuration has passed.
		for k := ps.first; k < ps.first+ps.n; k++ {
			if e := &p.evs[k]; !e.active && e.state == EVSkip && e.skipUntil <= now {
				p.endSkip(e)
			}
		}
	}
	if now-ps.lastShuffle >= p.reshuffle {
		ps.lastShuffle = now
		a := ps.active
		for i := len(a) - 1; i > 0; i-- {
			j := p.rng.IntN(i + 1)
			a[i], a[j] = a[j], a[i]
		}
	}
}

// pickIn returns a GOOD EV of plane ps other than exclude, or -1.
func (p *evPool) pickIn(ps *planeSet, now int64, exclude int32) int32 {
	if ps.good == 0 {
		// Every active EV is in SKIP: the plane sits this rotation out,
		// which is each EV's skipped turn (SKIP never blocks sending).
		for _, i := range ps.active {
			p.evs[i].passed = true
		}
		p.rotate(ps, now)
		if ps.good == 0 {
			return -1
		}
	}
	n := len(ps.active)
	for k := 0; k <= 2*n; k++ {
		if ps.cursor >= n {
			p.rotate(ps, now)
		}
		i := ps.active[ps.cursor]
		ps.cursor++
		if p.evs[i].state == EVGood && i != exclude {
			return i
		}
		if p.evs[i].state == EVSkip {
			p.evs[i].passed = true
		}
	}
	return -1
}

// pick chooses the EV of the next data packet: planes are visited round
// robin starting after the last used one; a plane qualifies when its port
// is up and has room (freePlanes). exclude is never returned; avoidPlane
// (≥ 0) is used only if no other plane qualifies. As a last resort, when no
// plane has a GOOD EV, a SKIP EV is used (SKIP never blocks sending).
func (p *evPool) pick(now int64, freePlanes uint32, exclude int32, avoidPlane int) int32 {
	P := len(p.planes)
	for pass := 0; pass < 2; pass++ {
		for k := 0; k < P; k++ {
			pl := (p.rr + k) % P
			ps := &p.planes[pl]
			if freePlanes&(1<<uint(pl)) == 0 || !ps.up || (pass == 0 && pl == avoidPlane) {
				continue
			}
			if i := p.pickIn(ps, now, exclude); i >= 0 {
				p.rr = pl + 1
				return i
			}
		}
		if avoidPlane < 0 {
			break
		}
	}
	for k := 0; k < P; k++ {
		pl := (p.rr + k) % P
		ps := &p.planes[pl]
		if !ps.up || freePlanes&(1<<uint(pl)) == 0 {
			continue
		}
		for _, i := range ps.active {
			if p.evs[i].state == EVSkip && i != exclude {
				p.rr = pl + 1
				return i
			}
		}
	}
	return -1
}

// canSend reports whether some plane in freePlanes could carry data now.
func (p *evPool) canSend(freePlanes uint32) bool {
	for pl := range p.planes {
		ps := &p.planes[pl]
		if freePlanes&(1<<uint(pl)) != 0 && ps.up && len(ps.active) > 0 { // the mask first: no load for a full plane
			return true
		}
	}
	return false
}

// anyPath reports whether some plane is up (on both sides) and has a
// usable EV in its active set: whether data could be sent at all, given
// room in a NIC port.
func (p *evPool) anyPath() bool {
	for pl := range p.planes {
		if ps := &p.planes[pl]; ps.up && len(ps.active) > 0 {
			return true
		}
	}
	return false
}
