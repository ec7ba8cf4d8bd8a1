package labhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vcluster/vcluster/ib"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
	"github.com/vcluster/vcluster/verbs"
)

// DefaultAlgorithm is the algorithm a request's empty "algorithm" means,
// per operation (as `vcluster collective --algo` defaults).
var DefaultAlgorithm = map[collectives.Op]string{
	collectives.AllReduce: "ring", collectives.AllGather: "ring", collectives.ReduceScatter: "ring",
	collectives.AllToAll: "pairwise", collectives.Broadcast: "chain",
}

// Bounds of a collective request.
const (
	MaxCollectiveBytes = 1 << 30 // size: real bytes, three buffers per run
	MaxIters           = 1000
	MaxWarmup          = 100
	DefaultTimeout     = 30 * time.Second
	MaxTimeout         = 10 * time.Minute
	// MaxRegisteredBytes bounds what one host registers over its life:
	// every run registers its own send, receive and scratch buffers and
	// makes its own QPs (the engine has no deregistration), so a host is
	// for tens of runs, not thousands; a run beyond the budget is refused
	// (restart the host to reclaim it).
	MaxRegisteredBytes = 4 << 30
	maxIDLen           = 128
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// collectiveRun is a validated request.
type collectiveRun struct {
	req     labapi.CollectiveRequest
	alg     *collectives.Algorithm
	size    uint64
	hosts   []int // rank → host
	peers   []labapi.Peer
	others  []labapi.Peer // every member but this host
	iters   int
	warmup  int
	timeout time.Duration
}

// requestError is a bad request (400), naming the field.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }

func badField(field, format string, a ...any) error {
	return &requestError{fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...))}
}

// validate checks a request against this host and its config; every
// error names the field, the reason and what is allowed.
func (h *Host) validate(rq labapi.CollectiveRequest) (*collectiveRun, error) {
	cfg := h.cl.Config
	run := &collectiveRun{req: rq}
	switch {
	case rq.ID == "":
		return nil, badField("id", "missing; every run needs an id unique to it")
	case len(rq.ID) > maxIDLen || !idPattern.MatchString(rq.ID):
		return nil, badField("id", "%q must be 1..%d characters of A-Z a-z 0-9 . _ -", rq.ID, maxIDLen)
	}
	op, err := collectives.ParseOp(rq.Op)
	if err != nil {
		return nil, badField("op", "%v", err)
	}
	name := rq.Algorithm
	if name == "" {
		name = DefaultAlgorithm[op]
	}
	if run.alg, err = collectives.Lookup(op, name); err != nil {
		return nil, badField("algorithm", "%v", err)
	}
	if run.size, err = units.ParseSize(rq.Size); err != nil {
		return nil, badField("size", "%q is not a size (bytes, or with K, M, G: powers of 1024): %v", rq.Size, err)
	}
	if run.size < 1 || run.size > MaxCollectiveBytes {
		return nil, badField("size", "%s is out of range; must be in [1, %s]", rq.Size, units.FormatBytes(MaxCollectiveBytes))
	}
	hosts := len(h.cl.Hosts)
	if len(rq.Peers) < 2 || len(rq.Peers) > hosts {
		return nil, badField("peers", "%d member(s); a collective needs 2..%d (the config's hosts)", len(rq.Peers), hosts)
	}
	seen := map[int]bool{}
	self := 0
	for i, p := range rq.Peers {
		f := fmt.Sprintf("peers[%d]", i)
		if p.Host < 0 || p.Host >= hosts {
			return nil, badField(f+".host", "%d is out of range; must be a host in [0, %d]", p.Host, hosts-1)
		}
		if seen[p.Host] {
			return nil, badField(f+".host", "host %d is listed twice; each member once", p.Host)
		}
		seen[p.Host] = true
		if _, port, err := net.SplitHostPort(p.API); err != nil || port == "" {
			return nil, badField(f+".api", "%q is not a host:port address", p.API)
		}
		if p.Host == h.id {
			self++
		} else {
			run.others = append(run.others, p)
		}
		run.hosts = append(run.hosts, p.Host)
	}
	if self != 1 {
		return nil, badField("peers", "this host (%d) is not a member; the request goes to the members only", h.id)
	}
	run.peers = rq.Peers
	if rq.Transport != "" && rq.Transport != cfg.Transport.Kind {
		return nil, badField("transport", "%q, but this host runs %q (transport.kind); start the lab with the transport you want", rq.Transport, cfg.Transport.Kind)
	}
	run.iters, run.warmup = rq.Iters, rq.Warmup
	if run.iters == 0 {
		run.iters = 1
	}
	if run.iters < 1 || run.iters > MaxIters {
		return nil, badField("iters", "%d is out of range; must be in [1, %d] (0: 1)", rq.Iters, MaxIters)
	}
	if run.warmup < 0 || run.warmup > MaxWarmup {
		return nil, badField("warmup", "%d is out of range; must be in [0, %d]", rq.Warmup, MaxWarmup)
	}
	run.timeout = time.Duration(rq.TimeoutMs) * time.Millisecond
	if rq.TimeoutMs == 0 {
		run.timeout = DefaultTimeout
	}
	if run.timeout <= 0 || run.timeout > MaxTimeout {
		return nil, badField("timeout_ms", "%d is out of range; must be in [1, %d] (0: %d)", rq.TimeoutMs, MaxTimeout.Milliseconds(), DefaultTimeout.Milliseconds())
	}
	return run, nil
}

func (h *Host) serveCollective(w http.ResponseWriter, r *http.Request) {
	var rq labapi.CollectiveRequest
	if err := decodeJSON(r, &rq); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	run, err := h.validate(rq)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if err := h.ex.open(rq.ID); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	if need := 3 * run.size; h.registered.Add(need) > MaxRegisteredBytes {
		h.registered.Add(-need)
		h.ex.finish(rq.ID)
		writeError(w, http.StatusInsufficientStorage, fmt.Errorf("size: %s needs %s of buffers, and this host has registered %s of its %s budget (MaxRegisteredBytes; restart it to reclaim)",
			rq.Size, units.FormatBytes(need), units.FormatBytes(h.registered.Load()), units.FormatBytes(MaxRegisteredBytes)))
		return
	}
	resp := make(chan labapi.CollectiveResponse, 1)
	if err := h.submit(func() { resp <- h.runCollective(run) }); err != nil {
		h.ex.finish(rq.ID)
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	select {
	case out := <-resp:
		writeJSON(w, http.StatusOK, out)
	case <-h.done:
		writeError(w, http.StatusServiceUnavailable, errStopping)
	}
}

// runCollective runs one request on the driver goroutine (outside any
// event): connect, exchange buffers, iterate with a barrier between
// iterations, answer this rank's row.
func (h *Host) runCollective(run *collectiveRun) (out labapi.CollectiveResponse) {
	id := run.req.ID
	defer h.ex.finish(id)
	out = labapi.CollectiveResponse{Host: h.id, Rank: -1, Op: string(run.alg.Op), Algo: run.alg.Name, Ranks: len(run.hosts), Wrong: -1, FailedPeer: -1}
	for i, hh := range run.hosts {
		if hh == h.id {
			out.Rank = i
		}
	}
	var conn *connector
	fail := func(err error) labapi.CollectiveResponse {
		if conn != nil {
			// The job is over: its QPs must not go on retransmitting
			// toward members that are gone or restarted (they would load
			// the fabric the next collective needs until their retries
			// ran out).
			conn.retire()
		}
		h.stats.collectivesFailed.Add(1)
		out.Error = err.Error()
		if ph, ok := collectives.BlamedHost(err); ok {
			out.FailedPeer = ph
		}
		var pf *PeerFailure
		if errors.As(err, &pf) {
			out.FailedPeer = pf.Host
		}
		// Tell the other members, whose watch ends their wait at once.
		h.ex.put(id, abortItem, everyone, abortNote{Error: out.Error, FailedPeer: out.FailedPeer})
		h.log.Printf("collective %s: %v", id, err)
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), run.timeout)
	defer cancel()
	// The same wall-clock bound in virtual time, for the iterations.
	deadline := h.loop.WallTime() + sim.Time(float64(run.timeout)/h.cl.Config.Run.RealtimeSlowdown)

	conn = &connector{h: h, run: run, ctx: ctx}
	m, err := collectives.New(h.cl, collectives.Options{Hosts: run.hosts, Local: []int{h.id}, Connector: conn})
	if err != nil {
		return fail(err)
	}
	t0 := time.Now()
	p, err := m.Prepare(run.alg, run.size, collectives.RunOptions{Iters: run.iters, Warmup: run.warmup})
	if err != nil {
		return fail(err)
	}
	tPrep := time.Now()
	// Every QP of this host is connected: peers may write now.
	if err := h.ex.put(id, "buffers", everyone, p.Local()); err != nil {
		return fail(err)
	}
	got := make([]map[int]collectives.RankBuffers, len(run.others))
	if err := h.waitRunning(func() error {
		return h.fetchAll(ctx, run.others, id, "buffers", func(i int) any { return &got[i] })
	}); err != nil {
		return fail(err)
	}
	remote := map[int]collectives.RankBuffers{}
	for i, g := range got {
		r, _ := p.Rank(run.others[i].Host)
		b, ok := g[r]
		if !ok {
			return fail(&PeerFailure{run.others[i].Host, run.others[i].API, fmt.Errorf("buffers: none for its rank %d", r)})
		}
		remote[r] = b
	}
	tBuf := time.Now()
	watch := h.watchPeers(ctx, id, watched(run.others, h.id, run.hosts), len(run.hosts))
	defer watch.stop()
	for it := 0; it < run.warmup+run.iters; it++ {
		if it > 0 {
			// Nobody starts iteration it before every member finished
			// it-1: its writes would land in buffers still being read.
			name := "iter-" + strconv.Itoa(it-1)
			if err := h.ex.put(id, name, everyone, true); err != nil {
				return fail(err)
			}
			var ok []bool = make([]bool, len(run.others))
			if err := h.waitRunning(func() error {
				return h.fetchAll(ctx, run.others, id, name, func(i int) any { return &ok[i] })
			}); err != nil {
				return fail(err)
			}
		}
		var (
			ended bool
			ierr  error
		)
		if err := p.Start(remote, deadline, func(e error) { ended, ierr = true, e }); err != nil {
			return fail(err)
		}
		h.loop.RunWhile(func() bool { return !ended && !h.stopping.Load() && watch.failed() == nil })
		switch {
		case ierr != nil:
			return fail(ierr)
		case !ended && h.stopping.Load():
			return fail(errStopping)
		case !ended:
			return fail(watch.failed())
		}
	}
	res := p.Result()
	h.log.Printf("collective %s: %s/%s %s over %d ranks: connected in %v, buffers exchanged in %v, %d iteration(s) in %v",
		id, run.alg.Op, run.alg.Name, units.FormatBytes(run.size), len(run.hosts), tPrep.Sub(t0).Round(time.Microsecond),
		tBuf.Sub(tPrep).Round(time.Microsecond), run.warmup+run.iters, time.Since(tBuf).Round(time.Microsecond))
	out.Bytes, out.Count, out.TimeNs, out.AlgBW, out.BusBW = res.Bytes, res.Count, int64(res.TimeNs), res.AlgBW, res.BusBW
	out.Wrong = res.Wrong
	out.Verified = res.Check == collectives.CheckOK
	out.Row = resultRow(res)
	if res.Check == collectives.CheckFailed {
		h.stats.collectivesFailed.Add(1)
		out.Error = fmt.Sprintf("check failed: %d wrong element(s) on this rank", res.Wrong)
		return out
	}
	h.stats.collectivesOK.Add(1)
	return out
}

// resultRow is res as its nccl-tests table row (collectives.WriteTable's).
func resultRow(res collectives.Result) string {
	var b bytes.Buffer
	collectives.WriteTable(&b, []collectives.Result{res})
	for _, l := range strings.Split(b.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// connector makes this host's QPs toward a peer process: it creates
// them, publishes their attributes for the peer, reads the peer's toward
// this host and connects. Prepare calls it in the same pair order on
// every member, so the waits cannot deadlock.
type connector struct {
	h    *Host
	run  *collectiveRun
	ctx  context.Context
	ends []cluster.QPEnd // every QP made for this run
}

// retire takes the run's QPs out of service (endpoint.Engine.Retire);
// on the driver goroutine, which owns the loop between events.
func (c *connector) retire() {
	for _, e := range c.ends {
		e.Engine.Retire(e.T.QPN())
	}
}

func (c *connector) Connect(local, remote, n int) ([]cluster.QPEnd, error) {
	h := c.h
	var peer labapi.Peer
	for _, p := range c.run.others {
		if p.Host == remote {
			peer = p
		}
	}
	if peer.API == "" || local != h.id {
		return nil, fmt.Errorf("labhost: connect host %d to %d: not a member pair of this request", local, remote)
	}
	ends := make([]cluster.QPEnd, n)
	attrs := make([]verbs.QPAttrs, n)
	for i := range n {
		e, err := h.cl.NewEnd(local, remote, i)
		if err != nil {
			return nil, err
		}
		// A random first PSN, as NICs pick one: a restarted peer reuses
		// QP numbers, and the old QPs' retransmissions must fall outside
		// the new QPs' windows (seen: a collective after a restart failed
		// with a remote access error from a stale write).
		e.InitialPSN = rand.Uint32() & ib.PSNMask
		ends[i], attrs[i] = e, e.Attrs()
		c.ends = append(c.ends, e)
		h.qps.add(e.T.QPN(), remote)
	}
	if err := h.ex.put(c.run.req.ID, "qps", remote, attrs); err != nil {
		return nil, err
	}
	var theirs []verbs.QPAttrs
	if err := h.waitRunning(func() error { return h.fetch(c.ctx, peer, c.run.req.ID, "qps", &theirs, len(c.run.others)+1) }); err != nil {
		return nil, err
	}
	if len(theirs) != n {
		return nil, &PeerFailure{peer.Host, peer.API, fmt.Errorf("qps: %d QP(s) toward host %d, want %d", len(theirs), h.id, n)}
	}
	for i, e := range ends {
		if theirs[i].Host != remote {
			return nil, &PeerFailure{peer.Host, peer.API, fmt.Errorf("qps: QP %d says host %d", i, theirs[i].Host)}
		}
		if err := h.cl.ConnectEnd(e, theirs[i]); err != nil {
			return nil, &PeerFailure{peer.Host, peer.API, err}
		}
	}
	return ends, nil
}

// peerWatch notices, while the iterations run, a member whose API stopped
// answering (its process died) or whose rank failed (it published its
// error), so the collective ends naming it at once rather than at the
// deadline.
type peerWatch struct {
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (w *peerWatch) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *peerWatch) stop() { w.cancel(); w.wg.Wait() }

// watchPeriod is PeerWatchPeriod, longer for runs of many members
// (each watches about 2·log₂ n others).
func watchPeriod(members int) time.Duration {
	return max(PeerWatchPeriod, time.Duration(members)*10*time.Millisecond)
}

// PeerWatchPeriod is how often a running collective checks that its
// members' APIs still answer.
const PeerWatchPeriod = 250 * time.Millisecond

// abortItem is the exchange item a member that failed publishes (its
// error), for the others' watch.
const abortItem = "abort"

// abortNote is the abort item: the member's error and whom it blames.
type abortNote struct {
	Error      string `json:"error"`
	FailedPeer int    `json:"failed_peer"`
}

// watched are the members a rank watches: those at ring distances 1, 2,
// 4, … either way (all of them in a run of up to 4). Watching every
// member was n² requests a period: 64 hosts' watch alone overloaded a
// 2-core machine until its APIs stopped answering. A failure still
// reaches every rank: the rank that notices publishes its abort note
// blaming the member, its watchers follow it, and the distances reach
// any rank within log₂ n hops.
func watched(others []labapi.Peer, self int, hosts []int) []labapi.Peer {
	n := len(hosts)
	me := slices.Index(hosts, self)
	byHost := map[int]labapi.Peer{}
	for _, p := range others {
		byHost[p.Host] = p
	}
	var out []labapi.Peer
	seen := map[int]bool{self: true}
	for d := 1; d < n; d *= 2 {
		for _, r := range []int{(me + d) % n, (me - d + n) % n} {
			if h := hosts[r]; !seen[h] {
				seen[h] = true
				out = append(out, byHost[h])
			}
		}
	}
	return out
}

func (h *Host) watchPeers(ctx context.Context, id string, peers []labapi.Peer, members int) *peerWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &peerWatch{cancel: cancel}
	client := &http.Client{Timeout: 2 * time.Second}
	for _, p := range peers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			misses := 0
			t := time.NewTicker(watchPeriod(members))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.API+ExchangePath+url.PathEscape(id)+"/"+abortItem+"?for="+strconv.Itoa(h.id), nil)
				resp, err := client.Do(req)
				var failure error
				switch {
				case err == nil:
					var why abortNote
					if resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&why) == nil {
						failure = &PeerFailure{p.Host, p.API, fmt.Errorf("its rank failed: %s", why.Error)}
						if why.FailedPeer >= 0 && why.FailedPeer != h.id {
							// It blames another member: so does this one.
							failure = &PeerFailure{why.FailedPeer, "", fmt.Errorf("host %d's rank failed on it: %s", p.Host, why.Error)}
						}
					}
					resp.Body.Close()
					misses = 0
				case ctx.Err() != nil:
					return
				default:
					// Refused twice: the process is gone. A request that
					// times out or finds no route (ARP unanswered: a
					// busy machine, or a container gone) eight in a row.
					limit := 8
					if errors.Is(err, syscall.ECONNREFUSED) {
						limit = 2
					}
					if misses++; misses >= limit {
						failure = &PeerFailure{p.Host, p.API, fmt.Errorf("stopped answering during the collective: %v", err)}
					}
				}
				if failure == nil {
					continue
				}
				w.mu.Lock()
				if w.err == nil {
					w.err = failure
				}
				w.mu.Unlock()
				h.loop.Inject(func() {})
				return
			}
		}()
	}
	return w
}
