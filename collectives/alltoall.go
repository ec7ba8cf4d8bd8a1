package collectives

// All-to-all: block j of rank r's send buffer goes to rank j, and lands as
// block r of its receive buffer.

func init() {
	Register(&Algorithm{Op: AllToAll, Name: "pairwise", Build: pairwiseAllToAll,
		Doc: "n−1 steps; at step s rank r sends to r+s and waits for r−s before the next step"})
	Register(&Algorithm{Op: AllToAll, Name: "direct", Build: directAllToAll,
		Doc: "every rank writes to every peer at once, then waits for all of them"})
}

func pairwiseAllToAll(p Params) (Plan, error) {
	b := NewBuilder(p)
	n, S := p.N, p.Bytes
	for r := 0; r < n; r++ {
		own, sz := Block(S, n, r)
		b.Copy(r, Recv, own, Send, own, sz)
		for s := 1; s < n; s++ {
			to, from := mod(r+s, n), mod(r-s, n)
			off, sz := Block(S, n, to)
			p.Slices(0, sz, func(_ int, o, l uint64) { b.Write(r, to, Send, off+o, Recv, own+o, l) })
			_, fsz := Block(S, n, r)
			p.Slices(0, fsz, func(_ int, _, l uint64) { b.Wait(r, from, l) })
		}
	}
	return b.Plan()
}

func directAllToAll(p Params) (Plan, error) {
	b := NewBuilder(p)
	n, S := p.N, p.Bytes
	for r := 0; r < n; r++ {
		own, sz := Block(S, n, r)
		b.Copy(r, Recv, own, Send, own, sz)
		for s := 1; s < n; s++ { // staggered start: rank r begins with r+1
			to := mod(r+s, n)
			off, sz := Block(S, n, to)
			p.Slices(0, sz, func(_ int, o, l uint64) { b.Write(r, to, Send, off+o, Recv, own+o, l) })
		}
		for s := 1; s < n; s++ {
			from := mod(r-s, n)
			p.Slices(0, sz, func(_ int, _, l uint64) { b.Wait(r, from, l) })
		}
	}
	return b.Plan()
}
