package collectives

// Tree all-reduce: a binary tree over the ranks in rank order (parent of
// r is (r−1)/2). Slices are summed up the tree to rank 0, which sends each
// finished slice back down. A rank interleaves the two directions with a
// lag, so the broadcast of early slices overlaps the reduction of later
// ones. Each rank sends S up and S down (2 children: S each way on its
// down-links), so on a one-port NIC it tops out near half the ring's bus
// bandwidth, but it takes only O(log n) hops of latency.

func init() {
	Register(&Algorithm{Op: AllReduce, Name: "tree", Build: treeAllReduce,
		Doc: "binary-tree reduce to rank 0 and broadcast back, sliced and pipelined"})
}

func treeAllReduce(p Params) (Plan, error) {
	b := NewBuilder(p)
	n, S := p.N, p.Bytes
	b.NeedScratch(2 * S) // a landing area per child
	depth := 0
	for 1<<depth < n+1 {
		depth++
	}
	type slice struct{ o, l uint64 }
	var sl []slice
	p.Slices(0, S, func(_ int, o, l uint64) { sl = append(sl, slice{o, l}) })
	lag := 2 * depth
	for r := 0; r < n; r++ {
		parent := (r - 1) / 2
		var kids []int
		for _, c := range []int{2*r + 1, 2*r + 2} {
			if c < n {
				kids = append(kids, c)
			}
		}
		b.Copy(r, Recv, 0, Send, 0, S)
		up := func(j int) {
			x := sl[j]
			for i, c := range kids {
				b.Wait(r, c, x.l)
				b.Reduce(r, Recv, x.o, Scratch, uint64(i)*S+x.o, x.l)
			}
			if r > 0 {
				b.Write(r, parent, Recv, x.o, Scratch, uint64((r-1)%2)*S+x.o, x.l)
			}
		}
		down := func(j int) {
			x := sl[j]
			if r > 0 {
				b.Wait(r, parent, x.l)
			}
			for _, c := range kids {
				b.Write(r, c, Recv, x.o, Recv, x.o, x.l)
			}
		}
		for j := 0; j < len(sl)+lag; j++ {
			if j < len(sl) {
				up(j)
			}
			if j >= lag {
				down(j - lag)
			}
		}
	}
	return b.Plan()
}
