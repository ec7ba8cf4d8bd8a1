package collectives

import (
	"encoding/binary"
	"math"
)

// addFloat32 adds the little-endian float32s of a into d.
func addFloat32(d, a []byte) {
	for i := 0; i+4 <= len(d); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(d[i:]))
		y := math.Float32frombits(binary.LittleEndian.Uint32(a[i:]))
		binary.LittleEndian.PutUint32(d[i:], math.Float32bits(x+y))
	}
}

// value is element i of rank r's input for run seed: a small integer, so
// sums over any number of ranks up to 2^20 are exact in float32 whatever
// the order of the additions, and the check can demand equality.
func value(seed uint64, r int, i uint64) float32 {
	h := (uint64(r)+1)*0x9e3779b97f4a7c15 ^ (i+seed)*0xbf58476d1ce4e5b9
	h ^= h >> 29
	return float32(int(h%15) - 7)
}

// fill writes rank r's input into its send buffer.
func fill(b []byte, seed uint64, r int) {
	for i := uint64(0); 4*i+4 <= uint64(len(b)); i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(value(seed, r, i)))
	}
}

// reference is the direct computation of a collective's result.
type reference struct {
	op        Op
	seed      uint64
	n, root   int
	recvElems uint64
	sum       []float32 // all-reduce, reduce-scatter: Σ over ranks of the inputs
}

func newReference(op Op, seed uint64, n, root int, send, recv uint64) *reference {
	ref := &reference{op: op, seed: seed, n: n, root: root, recvElems: recv / 4}
	if op == AllReduce || op == ReduceScatter {
		ref.sum = make([]float32, send/4)
		for q := 0; q < n; q++ {
			for i := range ref.sum {
				ref.sum[i] += value(seed, q, uint64(i))
			}
		}
	}
	return ref
}

// at returns element i of rank r's output.
func (ref *reference) at(r int, i uint64) float32 {
	e := ref.recvElems
	switch ref.op {
	case AllReduce:
		return ref.sum[i]
	case ReduceScatter: // rank r holds block r of the sum
		return ref.sum[uint64(r)*e+i]
	case AllGather: // block q comes from rank q
		per := e / uint64(ref.n)
		return value(ref.seed, int(i/per), i%per)
	case AllToAll: // block q of r's output is block r of q's input
		per := e / uint64(ref.n)
		return value(ref.seed, int(i/per), uint64(r)*per+i%per)
	case Broadcast:
		return value(ref.seed, ref.root, i)
	}
	return 0
}

// countWrong compares rank r's output with the direct computation and
// returns the number of wrong elements.
func (ref *reference) countWrong(r int, out []byte) int64 {
	var wrong int64
	for i := uint64(0); i < ref.recvElems; i++ {
		got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
		if got != ref.at(r, i) {
			wrong++
		}
	}
	return wrong
}
