package collectives

// Broadcast as a pipelined chain: root → root+1 → … → root−1. Each slice
// is forwarded as soon as it lands, so the chain moves S bytes in about
// S/B plus n−1 slice times (bus factor 1).

func init() {
	Register(&Algorithm{Op: Broadcast, Name: "chain", Build: chainBroadcast,
		Doc: "pipelined chain from the root through every rank in ring order"})
}

func chainBroadcast(p Params) (Plan, error) {
	b := NewBuilder(p)
	n := p.N
	for i := 0; i < n; i++ { // i-th rank in the chain
		r := mod(p.Root+i, n)
		prev, next := mod(r-1, n), mod(r+1, n)
		if i == 0 {
			b.Copy(r, Recv, 0, Send, 0, p.Bytes)
		}
		p.Slices(0, p.Bytes, func(_ int, o, l uint64) {
			if i > 0 {
				b.Wait(r, prev, l)
			}
			if i < n-1 {
				b.Write(r, next, Recv, o, Recv, o, l)
			}
		})
	}
	return b.Plan()
}
