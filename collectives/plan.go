package collectives

import "fmt"

// Buf names one of a rank's three registered buffers.
type Buf uint8

const (
	// Send is the input: what the rank contributes. Algorithms only read it.
	Send Buf = iota
	// Recv is the output the result is checked in.
	Recv
	// Scratch is the algorithm's own: landing slots for partial results.
	// Its size is what Plan.ScratchBytes asks for.
	Scratch
	numBufs
)

func (b Buf) String() string { return [...]string{"send", "recv", "scratch"}[b] }

// Kind is what a step does.
type Kind uint8

const (
	// Write posts an RDMA WriteImm of Len bytes from the rank's Src buffer
	// at SrcOff to Peer's Dst buffer at DstOff, the immediate carrying Tag.
	// It does not block: the rank moves on at once, so several writes are
	// in flight (pipelining); the collective ends when all completed.
	Write Kind = iota
	// Wait blocks until the WriteImm with Tag from Peer has landed (every
	// byte placed in this rank's memory).
	Wait
	// Reduce adds Len bytes of float32 at Src+SrcOff into Dst+DstOff.
	Reduce
	// Copy copies Len bytes from Src+SrcOff to Dst+DstOff (local memory).
	Copy
	// Drain blocks until every write the rank posted before it has
	// completed (its peer acknowledged every byte): the send half of
	// MPI_Sendrecv, for algorithms whose steps must not overlap.
	Drain
)

func (k Kind) String() string { return [...]string{"send", "wait", "reduce", "copy", "drain"}[k] }

// Step is one instruction of a rank's program.
type Step struct {
	Kind     Kind
	Peer     int    // Write, Wait: the other rank (plan rank, 0..n-1)
	Tag      uint32 // Write: the immediate; Wait: the immediate awaited
	Src, Dst Buf
	SrcOff   uint64
	DstOff   uint64
	Len      uint64
	Channel  int // Write: which of the connection's QPs (taken modulo their number)
}

// Plan is a collective compiled to per-rank programs.
type Plan struct {
	Steps        [][]Step // Steps[r] is rank r's program, run in order
	ScratchBytes uint64   // scratch each rank needs
}

// Params is what an algorithm is given to build its plan.
type Params struct {
	N        int    // ranks
	Bytes    uint64 // the nccl-tests "size": see SendBytes / RecvBytes for the buffers
	Root     int    // broadcast root
	Chunk    uint64 // pipeline slice: the largest single write (bytes, multiple of 4)
	Channels int    // QPs per connection (transport.qpsPerConnection)
}

// Builder accumulates a plan. Messages between a pair of ranks are numbered
// in the sender's write order: the tag of a write is that number, and the
// k-th Wait of rank r on peer p awaits p's k-th Write to r — so a plan must
// have every receiver wait for a peer's messages in the order the peer
// sent them (writes may still land out of order on different channels;
// the tag tells which one landed).
type Builder struct {
	P       Params
	plan    Plan
	sent    map[[2]int]uint32
	awaited map[[2]int]uint32
}

// NewBuilder starts an empty plan for p.N ranks.
func NewBuilder(p Params) *Builder {
	return &Builder{P: p, plan: Plan{Steps: make([][]Step, p.N)},
		sent: map[[2]int]uint32{}, awaited: map[[2]int]uint32{}}
}

// NeedScratch makes sure the plan reserves at least n bytes of scratch.
func (b *Builder) NeedScratch(n uint64) { b.plan.ScratchBytes = max(b.plan.ScratchBytes, n) }

// Write appends a write of n bytes from r's src+srcOff to peer's
// dst+dstOff. Channels go round-robin per pair. Zero-length writes are
// dropped (Wait drops its match the same way).
func (b *Builder) Write(r, peer int, src Buf, srcOff uint64, dst Buf, dstOff, n uint64) {
	if n == 0 {
		return
	}
	k := [2]int{r, peer}
	tag := b.sent[k]
	b.sent[k]++
	ch := int(tag) // consecutive messages to a peer take consecutive channels
	b.plan.Steps[r] = append(b.plan.Steps[r], Step{Kind: Write, Peer: peer, Tag: tag, Src: src, SrcOff: srcOff, Dst: dst, DstOff: dstOff, Len: n, Channel: ch})
}

// Wait appends a wait for the next message of n bytes from peer (nothing
// when n is 0: the matching write was dropped).
func (b *Builder) Wait(r, peer int, n uint64) {
	if n == 0 {
		return
	}
	k := [2]int{peer, r}
	tag := b.awaited[k]
	b.awaited[k]++
	b.plan.Steps[r] = append(b.plan.Steps[r], Step{Kind: Wait, Peer: peer, Tag: tag, Len: n})
}

// Reduce appends dst[dstOff:+n] += src[srcOff:+n] (float32) on rank r.
func (b *Builder) Reduce(r int, dst Buf, dstOff uint64, src Buf, srcOff, n uint64) {
	if n > 0 {
		b.plan.Steps[r] = append(b.plan.Steps[r], Step{Kind: Reduce, Peer: r, Src: src, SrcOff: srcOff, Dst: dst, DstOff: dstOff, Len: n})
	}
}

// Copy appends dst[dstOff:+n] = src[srcOff:+n] on rank r.
func (b *Builder) Copy(r int, dst Buf, dstOff uint64, src Buf, srcOff, n uint64) {
	if n > 0 && !(dst == src && dstOff == srcOff) {
		b.plan.Steps[r] = append(b.plan.Steps[r], Step{Kind: Copy, Peer: r, Src: src, SrcOff: srcOff, Dst: dst, DstOff: dstOff, Len: n})
	}
}

// Drain appends a step that blocks r until every write it posted before
// has completed.
func (b *Builder) Drain(r int) {
	b.plan.Steps[r] = append(b.plan.Steps[r], Step{Kind: Drain, Peer: r})
}

// Plan returns the plan built, after checking that every write has its wait.
func (b *Builder) Plan() (Plan, error) {
	for k, n := range b.sent {
		if b.awaited[k] != n {
			return Plan{}, fmt.Errorf("collectives: rank %d writes %d messages to rank %d, which waits for %d", k[0], n, k[1], b.awaited[k])
		}
	}
	for k, n := range b.awaited {
		if b.sent[k] != n {
			return Plan{}, fmt.Errorf("collectives: rank %d waits for %d messages from rank %d, which writes %d", k[1], n, k[0], b.sent[k])
		}
	}
	return b.plan, nil
}

// Block returns the byte range [off, off+n) of block i when total bytes
// of float32 are cut into parts nearly equal blocks (element-aligned).
func Block(total uint64, parts, i int) (off, n uint64) {
	e := total / 4
	lo := e * uint64(i) / uint64(parts)
	hi := e * uint64(i+1) / uint64(parts)
	return lo * 4, (hi - lo) * 4
}

// Slices cuts [off, off+n) into element-aligned pieces of at most chunk
// bytes, and at least min(channels, elements) pieces so every channel
// carries some of it. It calls f(i, off, n) for each.
func (p Params) Slices(off, n uint64, f func(i int, off, n uint64)) {
	if n == 0 {
		return
	}
	chunk := max(p.Chunk&^3, 4)
	k := int((n + chunk - 1) / chunk)
	k = max(k, min(p.Channels, int(n/4)))
	for i := 0; i < k; i++ {
		o, m := Block(n, k, i)
		f(i, off+o, m)
	}
}

// NumSlices is how many pieces Slices cuts n bytes into.
func (p Params) NumSlices(n uint64) int {
	k := 0
	p.Slices(0, n, func(int, uint64, uint64) { k++ })
	return k
}

// mod is the non-negative remainder.
func mod(a, n int) int { return ((a % n) + n) % n }
