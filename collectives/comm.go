package collectives

import (
	"fmt"
	"sync/atomic"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// Options configure a communicator.
type Options struct {
	// Hosts maps rank → host; nil means rank i is host i, for every host.
	Hosts []int
	// Chunk is the pipeline slice: the largest single write, in bytes
	// (default 1 MiB). Smaller slices pipeline better and cost more events.
	Chunk uint64
	// ReduceBps is the host's float32 reduction (and copy) speed in bytes
	// per second of the destination; 0 means reductions take no time.
	ReduceBps float64
	// NoCheck turns result verification off (it is on by default; it is
	// skipped anyway when the payload is elided: there are no bytes).
	NoCheck bool
	// Trace records every rank's steps for WriteTrace.
	Trace bool
	// Local lists the hosts whose ranks run in this process (a lab host
	// runs its own); the others' ranks run elsewhere and are known here
	// by their buffers' descriptors only. nil means every rank runs here.
	// With Local set the communicator runs through Prepare and Start
	// (remote.go), not Run.
	Local []int
	// Connector makes the connections to ranks elsewhere; required when
	// Local is set.
	Connector Connector
}

// Comm is a communicator: ranks on virtual hosts, their registered
// buffers, the connections between them (transport.qpsPerConnection QPs
// per pair of ranks that talk, made on first use), and the runtime that
// executes plans on the cluster. The transport is the cluster's: nothing
// here knows whether it is MRC or RoCE.
//
// On a partitioned cluster (cluster.NewPartitioned) every rank runs on
// its host's loop: its completions, steps and timed reductions are events
// of its host's partition only, and what the ranks share — the count of
// busy ranks, the failure flag — is atomic and read by the coordinator
// between windows. Plans are launched between runs, after cluster.Sync, at
// the latest time any partition reached; results are identical for any
// number of partitions and workers.
type Comm struct {
	C *cluster.Cluster
	// Loop is the cluster's single loop (nil on a cluster cut into several
	// partitions: ranks run on their hosts' loops).
	Loop     *sim.Loop
	opt      Options
	ranks    []*rank
	channels int
	real     bool
	trace    *Trace

	// the phase being executed
	running atomic.Int64 // ranks still busy (decremented on their partitions)
	failed  atomic.Bool  // some rank recorded an error
	end     sim.Time     // when the last rank of the latest wait finished

	// split is set when some ranks run elsewhere (Options.Local).
	split bool
	// watch, when set (Start), hears every rank finishing or failing.
	watch func()
	// prepared is the collective Prepare made ready last.
	prepared *Prepared
}

// channel is one QP from a rank to a peer.
type channel struct {
	e   *endpoint.Engine
	qpn uint32
}

// rank is one member's state: buffers, connections and the program it
// is executing.
type rank struct {
	id, host int
	loop     *sim.Loop // the host's loop (its partition's)
	bufs     [numBufs]*verbs.MR
	peers    map[int][]channel

	prog     []Step
	members  []int // plan rank → comm rank of the running plan
	pc       int
	busy     bool // inside a timed reduction/copy
	waiting  bool
	waitFrom sim.Time
	inAdv    bool
	again    bool
	inflight int // writes posted and not completed
	active   bool
	start    sim.Time
	arrived  map[uint64]int32 // (peer comm rank, tag) → landed and not yet waited for
	wrSeq    uint64
	sends    map[uint64]sendRec // trace: write in flight by WR id
	label    string
	end      sim.Time // when the program finished (last completion)
	err      error    // the rank's first failure in this phase
	errAt    sim.Time
	events   []traceEvent // trace events, on a partitioned cluster

	remote  bool    // runs in another process: only its buffers' descriptors are known
	pending []int32 // with Start: writes in flight by peer comm rank
}

type sendRec struct {
	at   sim.Time
	peer int
	tag  uint32
	n    uint64
}

// New creates a communicator over the cluster's hosts.
func New(c *cluster.Cluster, opt Options) (*Comm, error) {
	if opt.Chunk == 0 {
		opt.Chunk = 1 << 20
	}
	if opt.Chunk < 4 {
		return nil, fmt.Errorf("collectives: chunk of %d bytes (want ≥ 4)", opt.Chunk)
	}
	hosts := opt.Hosts
	if hosts == nil {
		for h := range c.Hosts {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) < 2 {
		return nil, fmt.Errorf("collectives: need at least 2 ranks, have %d", len(hosts))
	}
	seen := map[int]bool{}
	m := &Comm{C: c, Loop: c.Loop, opt: opt, channels: c.Config.Transport.QPsPerConnection,
		real: c.Config.Transport.Payload == config.PayloadReal}
	for i, h := range hosts {
		if h < 0 || h >= len(c.Hosts) || seen[h] {
			return nil, fmt.Errorf("collectives: rank %d on host %d: no such host or host used twice", i, h)
		}
		seen[h] = true
		m.ranks = append(m.ranks, &rank{id: i, host: h, loop: c.Hosts[h].Loop(), peers: map[int][]channel{}, arrived: map[uint64]int32{}})
	}
	if err := m.setLocal(opt.Local, opt.Connector); err != nil {
		return nil, err
	}
	if opt.Trace {
		m.trace = newTrace(m)
	}
	return m, nil
}

// Size returns the number of ranks.
func (m *Comm) Size() int { return len(m.ranks) }

// Channels returns the QPs per connection.
func (m *Comm) Channels() int { return m.channels }

// RealPayload reports whether buffers hold bytes (results can be checked).
func (m *Comm) RealPayload() bool { return m.real }

// Buffer returns rank r's buffer b (nil before the first run needing it).
func (m *Comm) Buffer(r int, b Buf) *verbs.MR { return m.ranks[r].bufs[b] }

// connect makes the QPs between comm ranks a and b.
func (m *Comm) connect(a, b int) error {
	ra, rb := m.ranks[a], m.ranks[b]
	if _, ok := ra.peers[b]; ok {
		return nil
	}
	ps, err := m.C.Connect(ra.host, rb.host)
	if err != nil {
		return err
	}
	for _, p := range ps {
		ra.peers[b] = append(ra.peers[b], channel{p.A.Engine, p.A.T.QPN()})
		rb.peers[a] = append(rb.peers[a], channel{p.B.Engine, p.B.T.QPN()})
		p.A.CQ.Handler = m.handler(ra, b, p.A.T)
		p.B.CQ.Handler = m.handler(rb, a, p.B.T)
	}
	return nil
}

// ensure registers buffers of at least the given sizes on rank r.
func (m *Comm) ensure(r *rank, sizes [numBufs]uint64) {
	for b, n := range sizes {
		if n == 0 {
			n = 4
		}
		if r.bufs[b] == nil || r.bufs[b].Len < n {
			r.bufs[b] = m.C.Region(r.host, n, nil)
		}
	}
}

// prepare connects every pair a plan's writes use and sizes the buffers.
func (m *Comm) prepare(p Plan, members []int, send, recv uint64) error {
	for pr, steps := range p.Steps {
		a := members[pr]
		for _, s := range steps {
			if s.Kind == Write {
				b := members[s.Peer]
				if err := m.connect(min(a, b), max(a, b)); err != nil {
					return err
				}
			}
		}
		m.ensure(m.ranks[a], [numBufs]uint64{send, recv, p.ScratchBytes})
	}
	return nil
}

// now is the time plans start at: the cluster's time, with every
// partition's loop brought to it (cluster.Sync), so that connections and
// posts made from here see the same time on every host.
func (m *Comm) now() sim.Time { return m.C.Sync() }

// launch starts plan p on the comm ranks members (plan rank i is comm
// rank members[i]) at time now (m.now()). Several plans over disjoint
// ranks may be launched before wait.
func (m *Comm) launch(p Plan, members []int, label string, now sim.Time) {
	for pr, steps := range p.Steps {
		r := m.ranks[members[pr]]
		r.prog, r.members, r.pc, r.active, r.start, r.label, r.end = steps, members, 0, true, now, label, now
		m.running.Add(1)
	}
	for pr := range p.Steps {
		m.advance(m.ranks[members[pr]])
	}
}

// wait runs the cluster until every launched rank has finished its
// program and all its writes completed, or something failed, and sets
// m.end to the time the last rank finished. A partitioned cluster checks
// between windows and stops at the first window boundary after that (the
// cluster's Now is then a little later than m.end; the classic loop stops
// at the finishing event itself).
func (m *Comm) wait() error {
	m.end = 0
	m.C.RunWhile(func() bool { return m.running.Load() > 0 && !m.failed.Load() })
	for _, r := range m.ranks {
		m.end = max(m.end, r.end)
	}
	if m.failed.Load() {
		// The earliest failure (then the lowest rank): the same one
		// whichever partition noticed first.
		var first *rank
		for _, r := range m.ranks {
			if r.err != nil && (first == nil || r.errAt < first.errAt) {
				first = r
			}
		}
		err := first.err
		m.reset()
		return err
	}
	if m.running.Load() > 0 {
		for _, r := range m.ranks {
			if r.active {
				err := fmt.Errorf("collectives: stalled at %v: rank %d at step %d of %d (%d writes in flight)", m.C.Now(), r.id, r.pc, len(r.prog), r.inflight)
				if r.pc < len(r.prog) {
					s := r.prog[r.pc]
					err = fmt.Errorf("%w, %s peer %d tag %d", err, s.Kind, r.members[s.Peer], s.Tag)
				}
				m.reset()
				return err
			}
		}
	}
	return nil
}

func (m *Comm) reset() {
	for _, r := range m.ranks {
		r.active, r.prog, r.busy, r.waiting, r.err = false, nil, false, false, nil
		clear(r.arrived)
	}
	m.running.Store(0)
	m.failed.Store(false)
}

// fail records r's first error (on r's loop) and tells the coordinator.
func (m *Comm) fail(r *rank, err error) {
	if r.err == nil {
		r.err, r.errAt = err, r.loop.Now()
		m.failed.Store(true)
		if m.watch != nil {
			m.watch()
		}
	}
}

func key(peer int, tag uint32) uint64 { return uint64(peer)<<32 | uint64(tag) }

// qpErrer is a transport that says why its QP went to ERROR (mrc.QP).
type qpErrer interface{ Err() error }

// completionError words a failed completion of r's QP t to comm rank peer:
// the direction (a Write r sent, or one r received), both hosts, and the
// QP's own reason when the transport gives one (the status of the first
// completion may be a flush: the request that failed the QP can come
// later in post order).
func (m *Comm) completionError(r *rank, peer int, t verbs.Transport, x verbs.Completion) error {
	from, to, arrow := r.id, peer, "→"
	if x.Op == verbs.OpRecvImm {
		arrow = "←"
	}
	why := fmt.Sprintf("%v %v", x.Op, x.Status)
	if e, ok := t.(qpErrer); ok && t.State() == verbs.QPError {
		if err := e.Err(); err != nil {
			why = err.Error()
		}
	}
	return fmt.Errorf("collectives: rank %d %s rank %d (h%d%sh%d): %s", from, arrow, to, r.host, arrow, m.ranks[peer].host, why)
}

// handler is the CQ handler of r's QP t to comm rank peer.
func (m *Comm) handler(r *rank, peer int, t verbs.Transport) func(verbs.Completion) {
	return func(x verbs.Completion) {
		if x.Status != verbs.StatusOK {
			err := m.completionError(r, peer, t, x)
			if q := m.prepared; q != nil && m.watch != nil {
				err = q.peerError(r, peer, err) // an iteration of Start: name the peer
			}
			m.fail(r, err)
		}
		if x.Op == verbs.OpRecvImm {
			r.arrived[key(peer, x.Imm)]++
			if m.trace != nil {
				m.trace.recv(r, peer, x.Imm, x.Bytes)
			}
			m.advance(r)
			return
		}
		r.inflight--
		if r.pending != nil {
			r.pending[peer]--
		}
		if m.trace != nil {
			if s, ok := r.sends[x.WRID]; ok {
				delete(r.sends, x.WRID)
				m.trace.send(r, x.WRID, s)
			}
		}
		if r.inflight == 0 && r.waiting && r.pc < len(r.prog) && r.prog[r.pc].Kind == Drain {
			m.advance(r) // its finishCheck follows
			return
		}
		m.finishCheck(r)
	}
}

// advance runs r's program as far as it can go now. Completion handlers
// may call it from inside a Post; the guard turns that into another turn
// of the outer call.
func (m *Comm) advance(r *rank) {
	if !r.active {
		return
	}
	if r.inAdv {
		r.again = true
		return
	}
	r.inAdv = true
	for {
		r.again = false
		m.run(r)
		if !r.again {
			break
		}
	}
	r.inAdv = false
	m.finishCheck(r)
}

func (m *Comm) finishCheck(r *rank) {
	if r.active && !r.inAdv && r.pc == len(r.prog) && r.inflight == 0 {
		r.active = false
		r.end = r.loop.Now()
		m.running.Add(-1)
		if m.trace != nil {
			m.trace.span(r, r.label, r.start, r.end, nil)
		}
		if m.watch != nil {
			m.watch()
		}
	}
}

func (m *Comm) run(r *rank) {
	for r.pc < len(r.prog) && !r.busy && r.err == nil {
		s := &r.prog[r.pc]
		switch s.Kind {
		case Write:
			if err := m.post(r, s); err != nil {
				m.fail(r, err)
				return
			}
			r.pc++
		case Wait:
			k := key(r.members[s.Peer], s.Tag)
			if r.arrived[k] == 0 {
				if !r.waiting {
					r.waiting, r.waitFrom = true, r.loop.Now()
				}
				return
			}
			r.arrived[k]--
			if m.trace != nil {
				from := r.loop.Now()
				if r.waiting {
					from = r.waitFrom
				}
				m.trace.span(r, "wait", from, r.loop.Now(), map[string]any{"peer": r.members[s.Peer], "tag": s.Tag, "bytes": s.Len})
			}
			r.waiting = false
			r.pc++
		case Drain:
			if r.inflight > 0 {
				if !r.waiting {
					r.waiting, r.waitFrom = true, r.loop.Now()
				}
				return
			}
			if m.trace != nil {
				from := r.loop.Now()
				if r.waiting {
					from = r.waitFrom
				}
				m.trace.span(r, "drain", from, r.loop.Now(), nil)
			}
			r.waiting = false
			r.pc++
		case Reduce, Copy:
			m.compute(r, s)
			if m.opt.ReduceBps > 0 {
				d := sim.Time(float64(s.Len) / m.opt.ReduceBps * 1e9)
				if d > 0 {
					r.busy = true
					from := r.loop.Now()
					r.loop.At(from+d, func() {
						if m.trace != nil {
							m.trace.span(r, s.Kind.String(), from, r.loop.Now(), map[string]any{"bytes": s.Len})
						}
						r.busy = false
						r.pc++
						m.advance(r)
					})
					return
				}
			}
			if m.trace != nil {
				m.trace.span(r, s.Kind.String(), r.loop.Now(), r.loop.Now(), map[string]any{"bytes": s.Len})
			}
			r.pc++
		}
	}
}

// post turns a Write step into a WriteImm work request.
func (m *Comm) post(r *rank, s *Step) error {
	peer := r.members[s.Peer]
	chs := r.peers[peer]
	if len(chs) == 0 {
		return fmt.Errorf("collectives: rank %d has no connection to rank %d", r.id, peer)
	}
	ch := chs[s.Channel%len(chs)]
	src, dst := r.bufs[s.Src], m.ranks[peer].bufs[s.Dst]
	if s.SrcOff+s.Len > src.Len || s.DstOff+s.Len > dst.Len {
		return fmt.Errorf("collectives: rank %d write %s[%d:+%d] → rank %d %s[%d:+%d] outside the buffers (%d, %d bytes)",
			r.id, s.Src, s.SrcOff, s.Len, peer, s.Dst, s.DstOff, s.Len, src.Len, dst.Len)
	}
	r.wrSeq++
	wr := verbs.WorkRequest{ID: r.wrSeq, Op: verbs.OpWriteImm, LocalKey: src.Key, LocalVA: src.VA + s.SrcOff, Length: s.Len,
		RemoteKey: dst.Key, RemoteVA: dst.VA + s.DstOff, Imm: s.Tag}
	if m.trace != nil {
		if r.sends == nil {
			r.sends = map[uint64]sendRec{}
		}
		r.sends[wr.ID] = sendRec{at: r.loop.Now(), peer: peer, tag: s.Tag, n: s.Len}
	}
	r.inflight++
	if r.pending != nil {
		r.pending[peer]++
	}
	if err := ch.e.Post(ch.qpn, wr); err != nil {
		r.inflight--
		if r.pending != nil {
			r.pending[peer]--
		}
		return fmt.Errorf("collectives: rank %d → rank %d: post: %w", r.id, peer, err)
	}
	return nil
}

// compute performs a Reduce or Copy on real bytes (nothing when elided).
func (m *Comm) compute(r *rank, s *Step) {
	src, dst := r.bufs[s.Src], r.bufs[s.Dst]
	if src.Virtual() || dst.Virtual() {
		return
	}
	a := src.Buf[s.SrcOff : s.SrcOff+s.Len]
	d := dst.Buf[s.DstOff : s.DstOff+s.Len]
	if s.Kind == Copy {
		copy(d, a)
		return
	}
	addFloat32(d, a)
}
