package collectives

import (
	"fmt"
	"slices"
	"strings"
)

// Op is a collective operation.
type Op string

const (
	AllReduce     Op = "allreduce"
	AllGather     Op = "allgather"
	ReduceScatter Op = "reducescatter"
	AllToAll      Op = "alltoall"
	Broadcast     Op = "broadcast"
)

// Ops lists the operations.
var Ops = []Op{AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast}

// ParseOp accepts the names of Ops (also with '_' or '-' inside).
func ParseOp(s string) (Op, error) {
	s = strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	for _, o := range Ops {
		if string(o) == s {
			return o, nil
		}
	}
	return "", fmt.Errorf("unknown collective %q (want one of %v)", s, Ops)
}

// Algorithm is one way to carry out an operation: Build compiles it to
// per-rank programs of steps, which the runtime executes on the loop.
type Algorithm struct {
	Op    Op
	Name  string
	Doc   string
	Build func(p Params) (Plan, error)
}

var registry []*Algorithm

// Register adds an algorithm (from an init function).
func Register(a *Algorithm) { registry = append(registry, a) }

// Lookup returns the algorithm name of op.
func Lookup(op Op, name string) (*Algorithm, error) {
	var names []string
	for _, a := range registry {
		if a.Op == op {
			if a.Name == name {
				return a, nil
			}
			names = append(names, a.Name)
		}
	}
	slices.Sort(names)
	return nil, fmt.Errorf("no algorithm %q for %s (have %v)", name, op, names)
}

// Algorithms returns the registered algorithms of op (all when op is ""),
// sorted by operation and name.
func Algorithms(op Op) []*Algorithm {
	var as []*Algorithm
	for _, a := range registry {
		if op == "" || a.Op == op {
			as = append(as, a)
		}
	}
	slices.SortFunc(as, func(x, y *Algorithm) int {
		return strings.Compare(string(x.Op)+"/"+x.Name, string(y.Op)+"/"+y.Name)
	})
	return as
}

// Buffers returns each rank's send and receive buffer sizes for op at the
// nccl-tests size bytes over n ranks: all-reduce, all-to-all and broadcast
// use size bytes for both; all-gather sends size/n and receives size;
// reduce-scatter sends size and receives size/n.
func Buffers(op Op, n int, size uint64) (send, recv uint64) {
	switch op {
	case AllGather:
		return size / uint64(n), size
	case ReduceScatter:
		return size, size / uint64(n)
	}
	return size, size
}

// RoundSize rounds size to what the operation can carry: a whole number of
// float32 per rank (a multiple of 4n bytes, at least 4n).
func RoundSize(n int, size uint64) uint64 {
	q := 4 * uint64(n)
	return max(size/q*q, q)
}

// BusFactor is the nccl-tests bus-bandwidth factor of op over n ranks.
func BusFactor(op Op, n int) float64 {
	switch op {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter, AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}
