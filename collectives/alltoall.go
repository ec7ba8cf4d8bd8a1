package collectives

// All-to-all: block j of rank r's send buffer goes to rank j, and lands as
// block r of its receive buffer.

func init() {
	Register(&Algorithm{Op: AllToAll, Name: "pairwise", Build: pairwiseAllToAll,
		Doc: "n−1 steps; at step s rank r sends to r+s, receives from r−s, and starts step s+1 once both are complete (MPI_Sendrecv)"})
	Register(&Algorithm{Op: AllToAll, Name: "pairwise-eager", Build: pairwiseEagerAllToAll,
		Doc: "pairwise without the send half: step s+1 starts once r−s has landed, its write to r+s may still be in flight (steps overlap)"})
	Register(&Algorithm{Op: AllToAll, Name: "direct", Build: directAllToAll,
		Doc: "every rank writes to every peer at once, then waits for all of them"})
}

// pairwiseAllToAll is the pairwise exchange (MPICH's long-message
// all-to-all): each step is one MPI_Sendrecv, so a rank writes to one peer
// at a time and every step is a permutation. The Drain at the end of a
// step is what makes it so: without it (pairwiseEagerAllToAll) a rank that
// fell behind finds its next messages already landed and posts the writes
// of several steps at once, and their receivers get several senders each
// (docs/collectives.md, "Pairwise all-to-all at scale").
func pairwiseAllToAll(p Params) (Plan, error) { return pairwise(p, true) }

func pairwiseEagerAllToAll(p Params) (Plan, error) { return pairwise(p, false) }

func pairwise(p Params, drain bool) (Plan, error) {
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
			if drain && s < n-1 { // the last step's writes end the collective anyway
				b.Drain(r)
			}
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
