package collectives

// Ring algorithms: rank r sends only to r+1 and receives only from r−1.
// The buffer is cut into n blocks; in each of the n−1 steps of a phase a
// rank passes one block on. Every block is cut into slices (Params.Chunk)
// that move independently, so a rank forwards slice j while slice j+1 is
// still arriving: the phases pipeline instead of running step-locked.

func init() {
	Register(&Algorithm{Op: AllReduce, Name: "ring", Build: ringAllReduce,
		Doc: "reduce-scatter then all-gather around the ring, sliced and pipelined: 2(n−1) steps of S/n"})
	Register(&Algorithm{Op: ReduceScatter, Name: "ring", Build: ringReduceScatter,
		Doc: "n−1 steps of S/n around the ring, partial sums in scratch"})
	Register(&Algorithm{Op: AllGather, Name: "ring", Build: ringAllGather,
		Doc: "n−1 steps of S/n around the ring, straight into the receive buffers"})
}

// ringReduce is the reduce-scatter phase on buffer work (every rank's
// full-size vector): at step s rank r sends block r−1−s to r+1, which adds
// it to its own copy; after n−1 steps rank r holds block r summed over all
// ranks in work. Partial sums land in scratch at the block's offset (each
// rank receives each block once, so slots are never reused).
func ringReduce(b *Builder, work Buf) {
	n, S := b.P.N, b.P.Bytes
	b.NeedScratch(S)
	for r := 0; r < n; r++ {
		right, left := mod(r+1, n), mod(r-1, n)
		for s := 0; s < n-1; s++ {
			off, sz := Block(S, n, mod(r-1-s, n))
			b.P.Slices(off, sz, func(_ int, o, l uint64) {
				if s > 0 { // the partial sum of this slice came from the left at step s−1
					b.Wait(r, left, l)
					b.Reduce(r, work, o, Scratch, o, l)
				}
				b.Write(r, right, work, o, Scratch, o, l)
			})
		}
		off, sz := Block(S, n, r) // the last partial sum of my own block
		b.P.Slices(off, sz, func(_ int, o, l uint64) {
			b.Wait(r, left, l)
			b.Reduce(r, work, o, Scratch, o, l)
		})
	}
}

// ringGather is the all-gather phase: rank r starts with block r of buf
// and at step s sends block r−s to r+1, which forwards it next step.
func ringGather(b *Builder, buf Buf) {
	n, S := b.P.N, b.P.Bytes
	for r := 0; r < n; r++ {
		right, left := mod(r+1, n), mod(r-1, n)
		for s := 0; s < n-1; s++ {
			off, sz := Block(S, n, mod(r-s, n))
			b.P.Slices(off, sz, func(_ int, o, l uint64) {
				if s > 0 {
					b.Wait(r, left, l)
				}
				b.Write(r, right, buf, o, buf, o, l)
			})
		}
		off, sz := Block(S, n, mod(r+1, n)) // the last block to arrive
		b.P.Slices(off, sz, func(_ int, _, l uint64) { b.Wait(r, left, l) })
	}
}

func ringAllReduce(p Params) (Plan, error) {
	b := NewBuilder(p)
	for r := 0; r < p.N; r++ {
		b.Copy(r, Recv, 0, Send, 0, p.Bytes)
	}
	ringReduce(b, Recv)
	ringGather(b, Recv)
	return b.Plan()
}

// ringReduceScatter leaves the send buffer untouched: the first hop sends
// straight from it; afterwards rank r adds its own block into the partial
// sum that arrived in scratch and forwards that; its own block's final sum
// goes into the receive buffer.
func ringReduceScatter(p Params) (Plan, error) {
	b := NewBuilder(p)
	n, S := p.N, p.Bytes
	b.NeedScratch(S)
	for r := 0; r < n; r++ {
		right, left := mod(r+1, n), mod(r-1, n)
		for s := 0; s < n-1; s++ {
			off, sz := Block(S, n, mod(r-1-s, n))
			b.P.Slices(off, sz, func(_ int, o, l uint64) {
				if s == 0 {
					b.Write(r, right, Send, o, Scratch, o, l)
					return
				}
				b.Wait(r, left, l)
				b.Reduce(r, Scratch, o, Send, o, l)
				b.Write(r, right, Scratch, o, Scratch, o, l)
			})
		}
		off, sz := Block(S, n, r)
		b.Copy(r, Recv, 0, Send, off, sz)
		b.P.Slices(off, sz, func(_ int, o, l uint64) {
			b.Wait(r, left, l)
			b.Reduce(r, Recv, o-off, Scratch, o, l)
		})
	}
	return b.Plan()
}

func ringAllGather(p Params) (Plan, error) {
	b := NewBuilder(p)
	for r := 0; r < p.N; r++ {
		off, sz := Block(p.Bytes, p.N, r)
		b.Copy(r, Recv, off, Send, 0, sz)
	}
	ringGather(b, Recv)
	return b.Plan()
}
