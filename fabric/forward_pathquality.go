package fabric

import (
	"fmt"
	"math"
)

// ForwardPathQuality is weighted ECMP (seed 003): a flow is hashed as in
// ECMP, but onto a table of buckets per destination subnet whose shares
// follow the weights a control plane sets (SetPathWeights: the path
// bandwidth its neighbours advertise, package pathquality). Until weights
// are set, or when reconvergence has changed a group since, it forwards
// exactly as ECMP.
const ForwardPathQuality ForwardingMode = 3

// ForwardPathQualityName is ForwardPathQuality's config word.
const ForwardPathQualityName = "pathquality"

// PathBuckets is the size of a weighted next-hop table: a member's share
// of the flows is its buckets / PathBuckets (weights are quantized to
// 1/256).
const PathBuckets = 256

func init() {
	registerForwarding(ForwardPathQuality, forwarding{
		name:        ForwardPathQualityName,
		next:        pathQualityNext,
		holeOffset:  6, // the subnet of a host address
		reconverges: true,
	})
}

// pathWeights is a switch's weighted next-hop tables, one per destination
// subnet (nil: not weighted yet).
type pathWeights struct {
	bySubnet []*weightTable
}

// weightTable maps a flow's hash to a member of the next-hop group it was
// built for. It is resilient: a weight change moves only the buckets it
// must (a flow keeps its next hop unless its bucket changed owner).
type weightTable struct {
	// group is the next-hop group the buckets index; the table is used only
	// while the switch still forwards from that very group (reconvergence
	// replaces groups: then ECMP hashing until the next SetPathWeights).
	group   []int32
	buckets [PathBuckets]uint8
	counts  []int // buckets per member
	weights []float64
	moved   uint64 // buckets that changed owner, over the table's life
}

// pathQualityNext hashes p over its destination's weighted table.
func pathQualityNext(s *Switch, p *Packet) int32 {
	g, dest := s.fibGroup(p)
	switch len(g) {
	case 0:
		return -1
	case 1:
		return g[0]
	}
	h := ecmpHash(p, s.seed)
	if w := s.pw; w != nil {
		if sub := dest >> 16; sub < len(w.bySubnet) {
			if t := w.bySubnet[sub]; t != nil && len(t.group) == len(g) && &t.group[0] == &g[0] {
				return g[t.buckets[h%PathBuckets]]
			}
		}
	}
	return g[h%uint64(len(g))]
}

// NumSubnets returns the number of destination subnets the switch routes
// (its FIB's size; the T0 / edge count of the fabric).
func (s *Switch) NumSubnets() int { return len(s.subnetGroup) }

// LocalSubnet returns the subnet whose hosts hang off this switch, or -1
// (not a T0 / edge switch).
func (s *Switch) LocalSubnet() int { return s.localSubnet }

// NextHops returns the ports the switch forwards to toward subnet now (its
// next-hop group after any reconvergence), nil for its own subnet or no
// route. Read only; a later reconvergence replaces, never edits, it.
func (s *Switch) NextHops(subnet int) []int32 {
	if subnet < 0 || subnet >= len(s.subnetGroup) || subnet == s.localSubnet || s.subnetGroup[subnet] < 0 {
		return nil
	}
	return s.groups[s.subnetGroup[subnet]]
}

// SetPathWeights weights the switch's next hops toward subnet: w[i] is
// the weight of NextHops(subnet)[i] (any non-negative scale; all zero
// means equal shares). Flows are split in proportion, quantized to
// PathBuckets buckets by largest remainder; when the group is the one the
// table was built for, only the buckets whose owner must change move (the
// lowest-numbered buckets of members over their share go to members under
// theirs), so flows on a next hop that kept its share keep it. It returns
// how many buckets changed owner. Only pathquality forwarding uses the
// tables; other modes accept and ignore them.
func (s *Switch) SetPathWeights(subnet int, w []float64) (moved int, err error) {
	g := s.NextHops(subnet)
	if g == nil {
		return 0, fmt.Errorf("fabric: %s has no next-hop group toward subnet %d", s.Name, subnet)
	}
	if len(w) != len(g) {
		return 0, fmt.Errorf("fabric: %s toward subnet %d: %d weights for %d next hops", s.Name, subnet, len(w), len(g))
	}
	if len(g) > 255 {
		return 0, fmt.Errorf("fabric: %s toward subnet %d: %d next hops, at most 255 are weighted", s.Name, subnet, len(g))
	}
	for i, x := range w {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return 0, fmt.Errorf("fabric: %s toward subnet %d: weight %d is %v, must be finite and ≥ 0", s.Name, subnet, i, x)
		}
	}
	if s.pw == nil {
		s.pw = &pathWeights{bySubnet: make([]*weightTable, len(s.subnetGroup))}
	}
	target := bucketShares(w)
	t := s.pw.bySubnet[subnet]
	if t == nil || len(t.group) != len(g) || &t.group[0] != &g[0] {
		// A new table (or a new group): interleave the members by smooth
		// weighted round robin, so that at equal shares bucket b is member
		// b mod n — with n a power of two the very next hop ECMP's hash
		// picks (h mod 256 mod n = h mod n): until the weights differ, a
		// flow takes the path ECMP would give it, and a comparison of the
		// two modes is paired draw for draw.
		t = &weightTable{group: g, counts: target}
		cur := make([]int, len(g))
		for b := range t.buckets {
			best := 0
			for m := range cur {
				cur[m] += target[m]
				if cur[m] > cur[best] {
					best = m
				}
			}
			cur[best] -= PathBuckets
			t.buckets[b] = uint8(best)
		}
		t.weights = append([]float64(nil), w...)
		s.pw.bySubnet[subnet] = t
		return PathBuckets, nil
	}
	// Resilient update: take buckets from members over their share,
	// lowest bucket first, and give them to members under theirs in order.
	over := make([]int, len(g))
	for m := range g {
		over[m] = t.counts[m] - target[m]
	}
	next := 0 // the next member under its share
	for b := range t.buckets {
		m := t.buckets[b]
		if over[m] <= 0 {
			continue
		}
		for over[next] >= 0 {
			next++
		}
		t.buckets[b] = uint8(next)
		over[m]--
		over[next]++
		moved++
	}
	t.counts = target
	copy(t.weights, w)
	t.moved += uint64(moved)
	return moved, nil
}

// PathWeights returns, toward subnet, the weights last set and each next
// hop's buckets (its share is buckets/PathBuckets); nil when unweighted
// or when the group has changed since they were set.
func (s *Switch) PathWeights(subnet int) (weights []float64, buckets []int) {
	g := s.NextHops(subnet)
	if s.pw == nil || g == nil {
		return nil, nil
	}
	t := s.pw.bySubnet[subnet]
	if t == nil || len(t.group) != len(g) || &t.group[0] != &g[0] {
		return nil, nil
	}
	return append([]float64(nil), t.weights...), append([]int(nil), t.counts...)
}

// bucketShares splits PathBuckets over weights w by largest remainder
// (ties to the lower index); all-zero weights split equally. The weights
// are scaled by their maximum first, so that finite weights whose sum
// overflows still split in proportion.
func bucketShares(w []float64) []int {
	var top, sum float64
	for _, x := range w {
		top = math.Max(top, x)
	}
	for _, x := range w {
		if top > 0 {
			sum += x / top
		}
	}
	n := make([]int, len(w))
	rem := make([]float64, len(w))
	left := PathBuckets
	for i, x := range w {
		q := float64(PathBuckets) / float64(len(w))
		if sum > 0 {
			q = x / top / sum * PathBuckets
		}
		n[i] = int(math.Floor(q))
		rem[i] = q - float64(n[i])
		left -= n[i]
	}
	for ; left > 0; left-- {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		n[best]++
		rem[best] = -1
	}
	return n
}
