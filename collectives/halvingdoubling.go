package collectives

// Recursive halving-doubling all-reduce (Rabenseifner): a reduce-scatter
// by recursive halving — at distance d = p/2, p/4, …, 1 each rank swaps
// half of its current range with partner rank^d and keeps the sum of the
// other half — then an all-gather by recursive doubling in reverse order.
// 2·log2(p) steps instead of the ring's 2(n−1): better for small
// messages. With n not a power of two, the first 2·(n−p) ranks pair up
// first: the even one of each pair hands its vector to the odd one, sits
// the rest out and gets the result back at the end.

func init() {
	Register(&Algorithm{Op: AllReduce, Name: "halving-doubling", Build: halvingDoublingAllReduce,
		Doc: "recursive halving reduce-scatter + recursive doubling all-gather; non-powers of two fold the extra ranks first"})
}

func halvingDoublingAllReduce(p Params) (Plan, error) {
	b := NewBuilder(p)
	n, S := p.N, p.Bytes
	pow := 1
	for pow*2 <= n {
		pow *= 2
	}
	rem := n - pow
	// new rank of a participant, and the comm rank of new rank v
	newRank := func(r int) int {
		if r < 2*rem {
			if r%2 == 0 {
				return -1
			}
			return r / 2
		}
		return r - rem
	}
	oldRank := func(v int) int {
		if v < rem {
			return 2*v + 1
		}
		return v + rem
	}
	// Scratch: [0, S) receives a folded-in vector; halving level k lands
	// at base[k] + (offset within the current range).
	levels := 0
	for d := pow / 2; d >= 1; d /= 2 {
		levels++
	}
	base := make([]uint64, levels+1)
	base[0] = S
	e := S / 4
	for k := 0; k < levels; k++ {
		e = (e + 1) / 2
		base[k+1] = base[k] + 4*e
	}
	b.NeedScratch(base[levels])
	send := func(r, to int, o, l uint64) {
		p.Slices(o, l, func(_ int, so, sl uint64) { b.Write(r, to, Recv, so, Recv, so, sl) })
	}
	recv := func(r, from int, l uint64) { p.Slices(0, l, func(_ int, _, sl uint64) { b.Wait(r, from, sl) }) }
	for r := 0; r < n; r++ {
		b.Copy(r, Recv, 0, Send, 0, S)
		v := newRank(r)
		if v < 0 { // folded: give my vector to r+1, get the result back
			p.Slices(0, S, func(_ int, o, l uint64) { b.Write(r, r+1, Send, o, Scratch, o, l) })
			recv(r, r+1, S)
			continue
		}
		if r < 2*rem {
			p.Slices(0, S, func(_ int, o, l uint64) {
				b.Wait(r, r-1, l)
				b.Reduce(r, Recv, o, Scratch, o, l)
			})
		}
		type rng struct{ lo, hi uint64 }
		var ranges []rng
		lo, hi := uint64(0), S
		k := 0
		for d := pow / 2; d >= 1; d, k = d/2, k+1 { // halving
			partner := oldRank(v ^ d)
			mid := lo + (hi-lo)/8*4 // element-aligned half
			keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
			if v&d != 0 {
				keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
			}
			p.Slices(sendLo, sendHi-sendLo, func(_ int, o, l uint64) {
				b.Write(r, partner, Recv, o, Scratch, base[k]+o-sendLo, l)
			})
			p.Slices(keepLo, keepHi-keepLo, func(_ int, o, l uint64) {
				b.Wait(r, partner, l)
				b.Reduce(r, Recv, o, Scratch, base[k]+o-keepLo, l)
			})
			ranges = append(ranges, rng{lo, hi})
			lo, hi = keepLo, keepHi
		}
		for d, k := 1, levels-1; d < pow; d, k = d*2, k-1 { // doubling
			partner := oldRank(v ^ d)
			send(r, partner, lo, hi-lo)
			whole := ranges[k]
			if lo == whole.lo { // the partner holds the upper part
				recv(r, partner, whole.hi-hi)
			} else {
				recv(r, partner, lo-whole.lo)
			}
			lo, hi = whole.lo, whole.hi
		}
		if r < 2*rem {
			send(r, r-1, 0, S)
		}
	}
	return b.Plan()
}
