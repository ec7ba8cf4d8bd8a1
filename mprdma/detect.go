package mprdma

// degree measures ob_max, the out-of-order degree the network produces now
// (seed 004 §2.3). A sample is the lag of a late original arrival: rcv_oo_h
// minus its PSN, the distance by which a slower path trailed the fastest.
// The seed defines ob_max as rcv_oo_h minus the smallest arrived PSN, a
// running maximum; one that never falls would keep L_max at the worst
// degree ever seen and give up the faster detection the seed wants when
// reordering eases. So it is a windowed maximum, re-measured in windows
// of DegreeWindow arrivals (packets, not time: loss and reordering are told
// apart by degree): ob_max is the largest sample of the current window and
// the one before, so a degree persists for at least one full window and
// is forgotten within two once the network stops producing it. O(1) per
// arrival, no history kept.
//
// Samples exclude repairs (their lag measures the repair, not a path: see
// the responder's "Fast and slow") but keep the late original of a hole
// judged lost (a spurious loss: exactly the reordering the threshold must
// learn).
type degree struct {
	window int // arrivals per window
	n      int // arrivals in the current window
	cur    int // largest sample of the current window
	prev   int // largest sample of the previous window (initially OMax)
}

func (d *degree) init(initial, window int) { *d = degree{window: window, prev: initial} }

// arrival counts one placed data arrival and, when sample, its lag.
func (d *degree) arrival(lag int, sample bool) {
	if sample && lag > d.cur {
		d.cur = lag
	}
	d.n++
	if d.n >= d.window {
		d.prev, d.cur, d.n = d.cur, 0, 0
	}
}

// obMax is ob_max now.
func (d *degree) obMax() int { return max(d.prev, d.cur) }
