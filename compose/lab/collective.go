package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// CollectiveOptions are lab run-collective's.
type CollectiveOptions struct {
	Op     string // collectives' op name
	Algo   string // "" for the op's default
	Size   string // nccl-tests size (units.ParseSize)
	Iters  int    // timed iterations (≥ 1)
	Warmup int
	// Timeout bounds the run in wall time on every member.
	Timeout time.Duration
	// Hosts are the members in rank order; nil for every host of the lab.
	Hosts []int
}

// MaxCollectiveTimeout bounds --timeout.
const MaxCollectiveTimeout = time.Hour

// RankOutcome is one member's answer.
type RankOutcome struct {
	Host int
	Resp labapi.CollectiveResponse
	Err  error // the request itself failed (no answer, a 4xx/5xx)
}

// Failed reports whether the rank failed, either way.
func (r RankOutcome) Failed() bool { return r.Err != nil || r.Resp.Error != "" || !r.Resp.Verified }

// CollectiveFailedError is a collective in which some rank failed: Hosts
// are the hosts to blame (those that did not answer, those others named
// as the failed peer, those that failed on their own); Reasons says, in
// short, why each is blamed (the ranks' own messages go to stderr).
type CollectiveFailedError struct {
	Hosts   []int
	Reasons []string
}

func (e *CollectiveFailedError) Error() string {
	names := make([]string, len(e.Hosts))
	for i, h := range e.Hosts {
		names[i] = labspec.HostName(h)
	}
	return fmt.Sprintf("collective failed on %s (%s)", strings.Join(names, ", "), strings.Join(e.Reasons, "; "))
}

// CheckCollective validates o's flags, before any lab is read (an
// *InvalidError when one is wrong).
func CheckCollective(o *CollectiveOptions) error {
	op, err := collectives.ParseOp(o.Op)
	if err != nil {
		return invalid("--op: %v", err)
	}
	o.Op = string(op)
	if o.Algo != "" {
		if _, err := collectives.Lookup(op, o.Algo); err != nil {
			return invalid("--algo: %v", err)
		}
	}
	size, err := units.ParseSize(o.Size)
	if err != nil || size == 0 {
		return invalid("--size: %q is not a size (a whole number of bytes ≥ 1, or with K, M, G, T)", o.Size)
	}
	if o.Iters < 1 {
		return invalid("--iters: %d; must be ≥ 1", o.Iters)
	}
	if o.Warmup < 0 {
		return invalid("--warmup: %d; must be ≥ 0", o.Warmup)
	}
	if o.Timeout <= 0 || o.Timeout > MaxCollectiveTimeout {
		return invalid("--timeout: %s; must be in (0s, %s]", o.Timeout, MaxCollectiveTimeout)
	}
	return nil
}

// checkMembers validates o.Hosts against the lab (nil: every host).
func checkMembers(st *State, o *CollectiveOptions) error {
	if len(o.Hosts) == 0 {
		o.Hosts = st.hostsOf()
	}
	seen := map[int]bool{}
	for _, h := range o.Hosts {
		if _, ok := st.HostProcess(h); !ok {
			return invalid("--hosts: host %d is not in the lab (hosts 0..%d)", h, st.Hosts-1)
		}
		if seen[h] {
			return invalid("--hosts: host %d is listed twice", h)
		}
		seen[h] = true
	}
	if len(o.Hosts) < 2 {
		return invalid("--hosts: a collective needs at least 2 members, got %d", len(o.Hosts))
	}
	return nil
}

// newRunID is a fresh collective id.
func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "lab-" + hex.EncodeToString(b)
}

// answerMargin is how much longer than the collective's own timeout lab
// waits for a member's answer.
const answerMargin = 15 * time.Second

// RunCollective runs one collective on the lab in dir: it POSTs the same
// request to every member at once, prints the nccl-tests header and one
// row to out (time: the slowest rank's; busbw from it; "ok" only if every
// rank verified) and each failed rank's error to errOut. A failed rank is
// a *CollectiveFailedError naming the hosts to blame.
func RunCollective(ctx context.Context, dir string, o CollectiveOptions, out, errOut io.Writer) ([]RankOutcome, error) {
	if err := CheckCollective(&o); err != nil {
		return nil, err
	}
	st, rt, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if err := checkMembers(st, &o); err != nil {
		return nil, err
	}
	// A member whose process is gone fails the run before any member
	// starts (and waits for it).
	var gone []int
	var names []string
	for _, h := range o.Hosts {
		if p, _ := st.HostProcess(h); !rt.Alive(*p) {
			gone = append(gone, h)
			names = append(names, p.Name)
		}
	}
	if len(gone) > 0 {
		return nil, &CollectiveFailedError{Hosts: gone, Reasons: []string{fmt.Sprintf("%s not running: lab restart %s", strings.Join(names, ", "), names[0])}}
	}
	req := labapi.CollectiveRequest{ID: newRunID(), Op: o.Op, Algorithm: o.Algo, Size: o.Size,
		Iters: o.Iters, Warmup: o.Warmup, TimeoutMs: int(o.Timeout.Milliseconds())}
	for _, h := range o.Hosts {
		p, _ := st.HostProcess(h)
		req.Peers = append(req.Peers, labapi.Peer{Host: h, API: p.API})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	outs := make([]RankOutcome, len(o.Hosts))
	var wg sync.WaitGroup
	for i, peer := range req.Peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i].Host = peer.Host
			rctx, cancel := context.WithTimeout(ctx, o.Timeout+answerMargin)
			defer cancel()
			err := post(rctx, peer.API, labapi.HostCollectivesPath, "application/json", body, &outs[i].Resp)
			if err != nil {
				outs[i].Err = fmt.Errorf("%s (%s) gave no answer: %w", labspec.HostName(peer.Host), peer.API, err)
			}
		}()
	}
	wg.Wait()
	collectives.WriteTable(out, []collectives.Result{summarize(o, outs)})
	return outs, judge(outs, errOut)
}

// summarize is the table row of a run: the slowest rank's time.
func summarize(o CollectiveOptions, outs []RankOutcome) collectives.Result {
	op := collectives.Op(o.Op)
	size, _ := units.ParseSize(o.Size)
	r := collectives.Result{Op: op, Algo: o.Algo, Ranks: len(outs), Bytes: size, Root: -1, Iters: o.Iters, Check: collectives.CheckOK}
	if op == collectives.Broadcast {
		r.Root = 0
	}
	answered := 0
	for _, x := range outs {
		if x.Err != nil {
			r.Check = collectives.CheckFailed
			continue
		}
		answered++
		if x.Resp.Bytes != 0 {
			r.Bytes, r.Count = x.Resp.Bytes, x.Resp.Count
		}
		if x.Resp.Algo != "" {
			r.Algo = x.Resp.Algo
		}
		r.TimeNs = max(r.TimeNs, sim.Time(x.Resp.TimeNs))
		if x.Resp.Wrong > 0 {
			r.Wrong += x.Resp.Wrong
		}
		if x.Failed() {
			r.Check = collectives.CheckFailed
		}
	}
	if answered == 0 {
		r.Wrong = -1
	}
	if r.TimeNs > 0 {
		r.AlgBW = float64(r.Bytes) / float64(r.TimeNs) // B/ns = GB/s
		r.BusBW = r.AlgBW * collectives.BusFactor(op, len(outs))
	}
	return r
}

// judge prints each failed rank's error to errOut and returns the
// verdict: nil, or a *CollectiveFailedError naming the hosts to blame.
func judge(outs []RankOutcome, errOut io.Writer) error {
	blamed := map[int]bool{}
	var silent, own, unverified []string
	blamers := map[int][]string{} // blamed host → the hosts that name it
	for _, x := range outs {
		name := labspec.HostName(x.Host)
		switch {
		case x.Err != nil:
			blamed[x.Host] = true
			silent = append(silent, name)
			fmt.Fprintln(errOut, x.Err)
		case x.Resp.Error != "":
			msg := fmt.Sprintf("%s (rank %d): %s", name, x.Resp.Rank, x.Resp.Error)
			if p := x.Resp.FailedPeer; p >= 0 && p != x.Host {
				blamed[p] = true
				blamers[p] = append(blamers[p], name)
				msg += " (blames " + labspec.HostName(p) + ")"
			} else {
				blamed[x.Host] = true
				own = append(own, name)
			}
			fmt.Fprintln(errOut, msg)
		case !x.Resp.Verified:
			blamed[x.Host] = true
			unverified = append(unverified, name)
			fmt.Fprintf(errOut, "%s (rank %d): output not verified (%d wrong elements)\n", name, x.Resp.Rank, x.Resp.Wrong)
		}
	}
	if len(blamed) == 0 {
		return nil
	}
	var hosts []int
	for h := range blamed {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	var reasons []string
	if len(silent) > 0 {
		reasons = append(reasons, strings.Join(silent, ", ")+" gave no answer")
	}
	for _, h := range hosts {
		if bs := blamers[h]; len(bs) > 0 {
			reasons = append(reasons, fmt.Sprintf("%s blame%s %s", strings.Join(bs, ", "), map[bool]string{true: "s", false: ""}[len(bs) == 1], labspec.HostName(h)))
		}
	}
	if len(own) > 0 {
		reasons = append(reasons, strings.Join(own, ", ")+" failed")
	}
	if len(unverified) > 0 {
		reasons = append(reasons, strings.Join(unverified, ", ")+" not verified")
	}
	return &CollectiveFailedError{Hosts: hosts, Reasons: reasons}
}
