package collectives

// This file is the template for a new algorithm (docs/collectives.md):
// copy it, rename the function, and describe each rank's program with the
// Builder. Here: all-gather by direct writes — every rank writes its block
// into every peer's receive buffer at once, then waits for the n−1 blocks
// it is owed. One step of latency, but every rank's NIC carries n−1
// messages at the same time (an incast at each receiver).

func init() {
	Register(&Algorithm{Op: AllGather, Name: "direct", Build: directAllGather,
		Doc: "every rank writes its block to every peer at once (template: example_allgather_direct.go)"})
}

func directAllGather(p Params) (Plan, error) {
	b := NewBuilder(p) // p.N ranks, p.Bytes the nccl-tests size (the gathered result)
	n := p.N
	for r := 0; r < n; r++ {
		// My block: where my contribution sits in everyone's result.
		off, sz := Block(p.Bytes, n, r)
		// Local step: my own block from my send buffer into my result.
		b.Copy(r, Recv, off, Send, 0, sz)
		// Writes do not block: all n−1 go out together, each cut into
		// slices of at most p.Chunk bytes spread over the channels.
		for s := 1; s < n; s++ {
			peer := mod(r+s, n)
			p.Slices(0, sz, func(_ int, o, l uint64) { b.Write(r, peer, Send, o, Recv, off+o, l) })
		}
		// Then wait for every peer's block, in the order each peer sent it.
		for s := 1; s < n; s++ {
			peer := mod(r-s, n)
			_, psz := Block(p.Bytes, n, peer)
			p.Slices(0, psz, func(_ int, _, l uint64) { b.Wait(r, peer, l) })
		}
	}
	return b.Plan() // checks that every write has a matching wait
}
