package collectives

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
	"github.com/vcluster/vcluster/verbs"
)

// Collectives across processes. In a lab every virtual host is its own
// process: each builds the whole cluster from the same config, but only
// its own host is real, and it runs only its own ranks' programs of the
// same plan (Options.Local). The QPs toward ranks elsewhere come from a
// Connector (their other end is made and connected by the peer's
// process); the buffers of ranks elsewhere are known by their descriptors
// only (BufferInfo: address, key, length), which is all a Write needs of
// its destination. Such a communicator runs one iteration at a time,
// driven by its process:
//
//	p, err := m.Prepare(a, size, o)  // connect, register and fill (may block on the Connector)
//	publish(p.Local())               // this process's ranks' buffers, to the others
//	err = p.Start(theirs, deadline, done) // on the loop goroutine; done on it too
//	… RunWhile until done; every process's done before the next Start …
//	p.Result()                       // time and the check of this process's ranks
//
// Iterations of different processes must not overlap: start the next one
// only after every process's done of the previous one (an exchange), or a
// fast rank's writes of iteration k+1 land in buffers a slow one still
// uses for iteration k.

// Connector makes the connections of a communicator whose ranks run in
// several processes (Options.Local).
type Connector interface {
	// Connect returns n connected QP ends on host local toward host
	// remote (the CQ handler unset: the Comm sets it). Prepare calls it
	// once per pair of hosts whose ranks the plan has talk, on each of the
	// two processes, in increasing order of (lower comm rank, higher comm
	// rank) — the same order everywhere, so a Connector that waits for the
	// peer to publish its ends cannot deadlock.
	Connect(local, remote, n int) ([]cluster.QPEnd, error)
}

// Exchange swaps the attributes of a connection's QPs with the process of
// host remote: it publishes mine (host local's ends, by QP index) and
// returns the peer's ends, by the same index. It may block until the peer
// has published.
type Exchange func(local, remote int, mine []verbs.QPAttrs) (theirs []verbs.QPAttrs, err error)

// ExchangeConnector is the Connector of a process that reaches its peers
// through x: for each connection it makes this host's n ends with
// cluster.NewEnd, swaps their Attrs through x, and connects end i to the
// peer's end i with cluster.ConnectEnd (the peer's process does the same
// with the roles reversed: both sides make their ends alike, so a
// single-plane transport's QP i is on the same plane at both ends).
func ExchangeConnector(c *cluster.Cluster, x Exchange) Connector {
	return &exchangeConnector{c: c, x: x}
}

type exchangeConnector struct {
	c *cluster.Cluster
	x Exchange
}

func (e *exchangeConnector) Connect(local, remote, n int) ([]cluster.QPEnd, error) {
	ends := make([]cluster.QPEnd, n)
	mine := make([]verbs.QPAttrs, n)
	for i := range n {
		end, err := e.c.NewEnd(local, remote, i)
		if err != nil {
			return nil, err
		}
		ends[i], mine[i] = end, end.Attrs()
	}
	theirs, err := e.x(local, remote, mine)
	if err != nil {
		return nil, fmt.Errorf("exchanging QPs with host %d: %w", remote, err)
	}
	if len(theirs) != n {
		return nil, fmt.Errorf("host %d published %d QP(s) for the connection, want %d", remote, len(theirs), n)
	}
	for i, a := range theirs {
		if a.Host != remote {
			return nil, fmt.Errorf("host %d published QP %d as host %d's", remote, i, a.Host)
		}
		if err := e.c.ConnectEnd(ends[i], a); err != nil {
			return nil, err
		}
	}
	return ends, nil
}

// BufferInfo describes a registered buffer to a process that writes into
// it from another process: its address, remote key and length.
type BufferInfo struct {
	VA  uint64 `json:"va"`
	Key uint32 `json:"key"`
	Len uint64 `json:"len"`
}

// RankBuffers are a rank's three buffers, indexed by Buf (Send, Recv,
// Scratch).
type RankBuffers [numBufs]BufferInfo

// CheckPending is the check of a Prepared result with no finished
// iteration to check (none finished yet, the last one failed, or one is
// running).
const CheckPending = "not checked (no finished iteration to check)"

var errSplit = errors.New("collectives: some ranks run in other processes (Options.Local): use Prepare and Start, not Run")

// setLocal marks the ranks that run elsewhere (New).
func (m *Comm) setLocal(local []int, conn Connector) error {
	if local == nil {
		if conn != nil {
			return fmt.Errorf("collectives: Options.Connector is set without Options.Local (nil Local: every rank runs here, there is nothing elsewhere to connect to)")
		}
		return nil
	}
	if len(local) == 0 {
		return fmt.Errorf("collectives: Options.Local is empty; want at least one host of the communicator's ranks (nil: all)")
	}
	if m.Loop == nil {
		return fmt.Errorf("collectives: Options.Local needs a cluster on one loop (not partitioned)")
	}
	byHost := map[int]*rank{}
	for _, r := range m.ranks {
		byHost[r.host] = r
		r.remote = true
	}
	for i, h := range local {
		r, ok := byHost[h]
		if !ok {
			return fmt.Errorf("collectives: Options.Local[%d]: host %d has no rank of the communicator", i, h)
		}
		if !r.remote {
			return fmt.Errorf("collectives: Options.Local[%d]: host %d listed twice", i, h)
		}
		r.remote = false
	}
	for _, r := range m.ranks {
		m.split = m.split || r.remote
	}
	if m.split && conn == nil {
		return fmt.Errorf("collectives: Options.Local leaves ranks to other processes: Options.Connector is required")
	}
	return nil
}

// Prepared is a collective made ready on this process's ranks: plan
// built, connections made, local buffers registered and filled. It runs
// one iteration per Start.
type Prepared struct {
	m           *Comm
	a           *Algorithm
	plan        Plan
	members     []int // plan rank → comm rank (the identity)
	local       []int // comm ranks that run here
	size, seed  uint64
	send, recv  uint64
	need        [numBufs]uint64 // the registered size of each buffer
	o           RunOptions
	label       string
	initialized bool

	// the iteration under way
	running, finishing bool
	t0, deadline       sim.Time
	timer              sim.Timer
	done               func(error)

	iters  int      // iterations finished or failed
	timed  int      // finished iterations after the warmup ones
	total  sim.Time // their times
	start  sim.Time // launch of the first timed iteration
	lastOK bool     // the last iteration finished: the outputs can be checked
}

// Prepare makes algorithm a ready for size bytes (rounded with
// RoundSize) on this process's ranks: it builds the plan, makes every
// connection a local rank's writes or a peer's writes to it need (ranks
// both here: cluster.Connect; one elsewhere: the Connector, which may
// block on a network exchange — call Prepare outside the loop's events),
// registers the local ranks' buffers and fills their inputs by the same
// rule as Run. o.Warmup iterations are not timed; o.Iters is how many
// timed ones the process means to run (reported by a DeadlineError);
// o.Deadline and o.Before are not used: Start takes the deadline.
//
// Prepare creates QPs and registers memory on the cluster: call it where
// the loop's state may be touched — on the loop goroutine while the loop
// is not running (between RunWhile calls), or before it first runs — and
// not from inside an event, since the Connector may block there. A later
// Prepare may register larger buffers (publish its Local anew) and
// retires this one (its Start is refused); connections already made are
// reused.
func (m *Comm) Prepare(a *Algorithm, size uint64, o RunOptions) (*Prepared, error) {
	if m.Loop == nil {
		return nil, fmt.Errorf("collectives: Prepare needs a cluster on one loop (not partitioned)")
	}
	if a == nil || a.Build == nil {
		return nil, fmt.Errorf("collectives: Prepare without an algorithm")
	}
	if q := m.prepared; q != nil && q.running {
		return nil, fmt.Errorf("collectives: Prepare while an iteration of %s is running", q.label)
	}
	n := m.Size()
	o.Iters = max(o.Iters, 1)
	switch {
	case o.Warmup < 0:
		return nil, fmt.Errorf("collectives: warmup %d iterations: want ≥ 0", o.Warmup)
	case o.Root < 0 || o.Root >= n:
		return nil, fmt.Errorf("collectives: root %d outside 0..%d", o.Root, n-1)
	}
	size = RoundSize(n, size)
	plan, err := a.Build(Params{N: n, Bytes: size, Root: o.Root, Chunk: m.opt.Chunk, Channels: m.channels})
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", a.Op, a.Name, err)
	}
	if len(plan.Steps) != n {
		return nil, fmt.Errorf("%s/%s: plan has %d programs for %d ranks", a.Op, a.Name, len(plan.Steps), n)
	}
	p := &Prepared{m: m, a: a, plan: plan, size: size, seed: m.C.Config.Seed ^ size, o: o,
		label: fmt.Sprintf("%s %s %s", a.Op, a.Name, units.FormatBytes(size))}
	p.send, p.recv = Buffers(a.Op, n, size)
	p.need = [numBufs]uint64{p.send, p.recv, plan.ScratchBytes}
	for b, v := range p.need {
		if v == 0 {
			p.need[b] = 4 // as ensure registers it
		}
	}
	for i := range n {
		p.members = append(p.members, i)
		if !m.ranks[i].remote {
			p.local = append(p.local, i)
		}
	}
	// The pairs that talk, at least one end here, in (lower, higher) order.
	type pair struct{ a, b int }
	seen := map[pair]bool{}
	var pairs []pair
	for pr, steps := range plan.Steps {
		for _, s := range steps {
			if s.Kind != Write {
				continue
			}
			k := pair{min(pr, s.Peer), max(pr, s.Peer)}
			if seen[k] || m.ranks[k.a].remote && m.ranks[k.b].remote {
				continue
			}
			seen[k] = true
			pairs = append(pairs, k)
		}
	}
	slices.SortFunc(pairs, func(x, y pair) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b)) })
	for _, k := range pairs {
		var err error
		switch {
		case !m.ranks[k.a].remote && !m.ranks[k.b].remote:
			err = m.connect(k.a, k.b)
		case m.ranks[k.a].remote:
			err = m.connectRemote(k.b, k.a)
		default:
			err = m.connectRemote(k.a, k.b)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, cr := range p.local {
		r := m.ranks[cr]
		m.ensure(r, [numBufs]uint64{p.send, p.recv, plan.ScratchBytes})
		r.pending = make([]int32, n)
		if m.real && !m.opt.NoCheck {
			fill(r.bufs[Send].Buf[:p.send], p.seed, cr)
		}
	}
	m.prepared = p
	return p, nil
}

// connectRemote makes the QPs of local comm rank l toward rank r, which
// runs elsewhere, through the Connector.
func (m *Comm) connectRemote(l, r int) error {
	rl, rr := m.ranks[l], m.ranks[r]
	if _, ok := rl.peers[r]; ok {
		return nil
	}
	ends, err := m.opt.Connector.Connect(rl.host, rr.host, m.channels)
	if err != nil {
		return fmt.Errorf("collectives: connecting rank %d (host %d) to rank %d (host %d): %w", l, rl.host, r, rr.host, err)
	}
	if len(ends) != m.channels {
		return fmt.Errorf("collectives: connecting rank %d (host %d) to rank %d (host %d): the Connector gave %d QPs, want %d (transport.qpsPerConnection)",
			l, rl.host, r, rr.host, len(ends), m.channels)
	}
	for i, e := range ends {
		if e.Host != rl.host || e.Engine == nil || e.T == nil || e.CQ == nil || e.Engine != m.C.Hosts[rl.host].RDMA() {
			return fmt.Errorf("collectives: connecting rank %d (host %d) to rank %d (host %d): QP end %d is not a QP of host %d with a CQ", l, rl.host, r, rr.host, i, rl.host)
		}
		if e.T.State() != verbs.QPReady {
			return fmt.Errorf("collectives: connecting rank %d (host %d) to rank %d (host %d): QP end %d (QPN %#x) is %v, want connected", l, rl.host, r, rr.host, i, e.T.QPN(), e.T.State())
		}
	}
	for _, e := range ends {
		rl.peers[r] = append(rl.peers[r], channel{e.Engine, e.T.QPN()})
		e.CQ.Handler = m.handler(rl, r, e.T)
	}
	return nil
}

// Local returns the buffers of this process's ranks by comm rank: what
// the other processes need to write into them (publish it).
func (p *Prepared) Local() map[int]RankBuffers {
	out := make(map[int]RankBuffers, len(p.local))
	for _, cr := range p.local {
		var rb RankBuffers
		for b, mr := range p.m.ranks[cr].bufs {
			rb[b] = BufferInfo{VA: mr.VA, Key: mr.Key, Len: mr.Len}
		}
		out[cr] = rb
	}
	return out
}

// Rank returns the comm rank on host, if the communicator has one there.
func (p *Prepared) Rank(host int) (int, bool) {
	for _, r := range p.m.ranks {
		if r.host == host {
			return r.id, true
		}
	}
	return 0, false
}

// Need returns the least length each of a rank's buffers must have
// (Start refuses a remote rank's smaller one).
func (p *Prepared) Need() [numBufs]uint64 { return p.need }

// Running reports whether an iteration was started and its done not yet
// called.
func (p *Prepared) Running() bool { return p.running }

// Iterations returns how many iterations ended (finished or failed).
func (p *Prepared) Iterations() int { return p.iters }

// Start launches one iteration of the local ranks at the loop's now
// synced with the wall clock (WallTime: in real-time pacing the loop's
// Now lags it while idle): it schedules the launch as an event at that
// time, so call it on the loop goroutine (between RunWhile calls, or from
// an event or injection). remote gives every remote rank's buffers by
// comm rank (entries for local ranks are ignored); Start refuses one
// missing or smaller than the plan needs, naming the rank and the host.
// deadline, when not 0, is the virtual time by which the iteration must
// have finished. done is called once, on the loop goroutine, when every
// local rank finished its program and its writes completed (nil), or one
// failed or the deadline passed (the error: a *PeerError naming the peer
// to blame, wrapping the QP's error or a *DeadlineError). Without a
// deadline, an iteration whose peers never write stays running.
func (p *Prepared) Start(remote map[int]RankBuffers, deadline sim.Time, done func(error)) error {
	m := p.m
	switch {
	case m.prepared != p:
		return fmt.Errorf("collectives: Start of %s: a later Prepare replaced it", p.label)
	case p.running:
		return fmt.Errorf("collectives: Start of %s: iteration %d is still running", p.label, p.iters+1)
	case done == nil:
		return fmt.Errorf("collectives: Start of %s: needs a done callback", p.label)
	}
	now := m.Loop.WallTime()
	if deadline != 0 && deadline <= now {
		return fmt.Errorf("%s/%s %d bytes: %w", p.a.Op, p.a.Name, p.size, &DeadlineError{Deadline: deadline, Iteration: p.iters + 1,
			Iters: max(p.o.Warmup+p.o.Iters, p.iters+1), Warmup: p.iters < p.o.Warmup, Unfinished: len(p.local), Ranks: len(p.local), NotStarted: true})
	}
	mrs := map[int][numBufs]*verbs.MR{}
	for _, r := range m.ranks {
		if !r.remote {
			continue
		}
		rb, ok := remote[r.id]
		if !ok {
			return fmt.Errorf("collectives: Start of %s: no buffers given for remote rank %d (host %d)", p.label, r.id, r.host)
		}
		var set [numBufs]*verbs.MR
		for b := range numBufs {
			bi := rb[b]
			switch {
			case bi.Key == 0:
				return fmt.Errorf("collectives: Start of %s: remote rank %d (host %d): %s buffer with key 0 (keys of registered regions start at 1)", p.label, r.id, r.host, b)
			case bi.Len < p.need[b]:
				return fmt.Errorf("collectives: Start of %s: remote rank %d (host %d): %s buffer of %d bytes, want ≥ %d", p.label, r.id, r.host, b, bi.Len, p.need[b])
			case bi.VA+bi.Len < bi.VA:
				return fmt.Errorf("collectives: Start of %s: remote rank %d (host %d): %s buffer at %#x of %d bytes wraps the address space", p.label, r.id, r.host, b, bi.VA, bi.Len)
			}
			set[b] = &verbs.MR{Key: bi.Key, VA: bi.VA, Len: bi.Len}
		}
		mrs[r.id] = set
	}
	for cr, set := range mrs {
		m.ranks[cr].bufs = set
	}
	p.running, p.finishing, p.deadline, p.done, p.lastOK = true, false, deadline, done, false
	m.Loop.At(now, p.launch)
	return nil
}

// launch starts the local ranks' programs (an event at Start's time).
func (p *Prepared) launch() {
	m := p.m
	p.t0 = m.Loop.Now()
	if p.iters == p.o.Warmup {
		p.start = p.t0
	}
	m.running.Store(0)
	m.failed.Store(false)
	m.watch = p.check
	for _, cr := range p.local {
		r := m.ranks[cr]
		r.prog, r.members, r.pc, r.active, r.start, r.label, r.end = p.plan.Steps[cr], p.members, 0, true, p.t0, p.label, p.t0
		r.err, r.busy, r.waiting = nil, false, false // a late completion of a failed iteration may have set them
		m.running.Add(1)
	}
	if p.deadline > 0 {
		p.timer = m.Loop.At(p.deadline, p.expire)
	}
	for _, cr := range p.local {
		m.advance(m.ranks[cr])
	}
	p.check()
}

// check is the Comm's watch while an iteration runs: once every local
// rank finished, or one failed, it ends the iteration in an event of its
// own (not inside the completion handler that noticed).
func (p *Prepared) check() {
	m := p.m
	if !p.running || p.finishing || m.running.Load() > 0 && !m.failed.Load() {
		return
	}
	p.finishing = true
	m.Loop.At(m.Loop.Now(), p.finish)
}

// finish ends the iteration and calls done.
func (p *Prepared) finish() {
	m := p.m
	m.watch = nil
	p.timer.Stop()
	done := p.done
	p.running, p.finishing, p.done = false, false, nil
	it := p.iters
	p.iters++
	if m.failed.Load() {
		err := p.failure()
		m.reset()
		done(fmt.Errorf("%s/%s %d bytes: %w", p.a.Op, p.a.Name, p.size, err))
		return
	}
	end := p.t0
	for _, cr := range p.local {
		end = max(end, m.ranks[cr].end)
	}
	if it >= p.o.Warmup {
		p.timed++
		p.total += end - p.t0
	}
	p.lastOK = true
	done(nil)
}

// failure is the iteration's error: the earliest local failure (then the
// lowest rank), as a PeerError.
func (p *Prepared) failure() error {
	var first *rank
	for _, cr := range p.local {
		r := p.m.ranks[cr]
		if r.err != nil && (first == nil || r.errAt < first.errAt) {
			first = r
		}
	}
	if first == nil {
		return fmt.Errorf("collectives: %s failed with no local rank's error", p.label)
	}
	var pe *PeerError
	if errors.As(first.err, &pe) {
		return first.err
	}
	return p.peerError(first, p.blame(first), first.err)
}

// peerError words err of local rank r with peer comm rank peer to blame
// (-1: none).
func (p *Prepared) peerError(r *rank, peer int, err error) *PeerError {
	e := &PeerError{Rank: r.id, Host: r.host, PeerRank: peer, PeerHost: -1, Err: err}
	if peer >= 0 {
		e.PeerHost = p.m.ranks[peer].host
	}
	return e
}

// blame is the peer local rank r is held up by: the one its current Wait
// waits for or its current Write writes to, else one its writes in flight
// go to; -1 when none.
func (p *Prepared) blame(r *rank) int {
	if r.pc < len(r.prog) {
		if s := r.prog[r.pc]; s.Kind == Wait || s.Kind == Write {
			return r.members[s.Peer]
		}
	}
	for peer, k := range r.pending {
		if k > 0 {
			return peer
		}
	}
	return -1
}

// expire is the deadline: the first unfinished local rank fails with a
// DeadlineError, blaming the peer it was held up by.
func (p *Prepared) expire() {
	m := p.m
	if !p.running || p.finishing {
		return
	}
	e := &DeadlineError{Deadline: p.deadline, Iteration: p.iters + 1, Iters: max(p.o.Warmup+p.o.Iters, p.iters+1), Warmup: p.iters < p.o.Warmup}
	if first := m.tally(e, p.local); first != nil {
		m.fail(first, p.peerError(first, p.blame(first), e))
	}
}

// Result returns the nccl-tests row over the iterations started after
// o.Warmup that finished: the time is the mean over them of this
// process's launch → its last local rank finished; the check covers the
// local ranks' outputs of the last iteration only (Wrong counts local
// elements), against the same reference as Run's.
func (p *Prepared) Result() Result {
	m := p.m
	n := m.Size()
	res := Result{Op: p.a.Op, Algo: p.a.Name, Ranks: n, Bytes: p.size, Count: p.send / 4, Root: -1, Iters: p.timed, Start: p.start}
	switch p.a.Op {
	case ReduceScatter:
		res.Count = p.recv / 4
	case Broadcast:
		res.Root = p.o.Root
	}
	if p.timed > 0 {
		res.TimeNs = p.total / sim.Time(p.timed)
	}
	if res.TimeNs > 0 {
		res.AlgBW = float64(p.size) / float64(res.TimeNs)
		res.BusBW = res.AlgBW * BusFactor(p.a.Op, n)
	}
	res.Wrong = -1
	switch {
	case m.opt.NoCheck:
		res.Check = CheckOff
	case !m.real:
		res.Check = CheckSkipped
	case !p.lastOK || p.running:
		res.Check = CheckPending
	default:
		ref := newReference(p.a.Op, p.seed, n, p.o.Root, p.send, p.recv)
		res.Wrong = 0
		for _, cr := range p.local {
			res.Wrong += ref.countWrong(cr, m.ranks[cr].bufs[Recv].Buf[:p.recv])
		}
		res.Check = CheckOK
		if res.Wrong > 0 {
			res.Check = CheckFailed
		}
	}
	return res
}

// PeerError is what a failed iteration of a Prepared collective names:
// the local rank (and its host) that failed, and the peer rank and host
// to blame — the QP's other end for a failed completion; for a deadline
// (Err a *DeadlineError) the peer the rank was waiting for or writing to.
// PeerRank and PeerHost are -1 when there is no peer to blame.
type PeerError struct {
	Rank, Host, PeerRank, PeerHost int
	Err                            error
}

func (e *PeerError) Error() string {
	if e.PeerHost < 0 {
		return fmt.Sprintf("rank %d (host %d): %v", e.Rank, e.Host, e.Err)
	}
	return fmt.Sprintf("rank %d (host %d), peer rank %d (host %d): %v", e.Rank, e.Host, e.PeerRank, e.PeerHost, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// BlamedHost returns the peer host a failure blames (a PeerError in
// err's chain with a peer).
func BlamedHost(err error) (host int, ok bool) {
	var pe *PeerError
	if errors.As(err, &pe) && pe.PeerHost >= 0 {
		return pe.PeerHost, true
	}
	return -1, false
}
