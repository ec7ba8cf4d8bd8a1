package roce

import "github.com/vcluster/vcluster/verbs"

// Stats implements verbs.Transport. The QP keeps one verbs.QPStats, both
// ends' counters in it; RateBps is the reaction point's, read without
// running its timers.
func (q *QP) Stats() verbs.QPStats {
	if debugInvariants {
		q.checkInvariants()
	}
	s := q.stats
	s.RateBps = q.cc.rateBps()
	return s
}
