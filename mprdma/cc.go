package mprdma

import "github.com/vcluster/vcluster/internal/ring"

// window is MP-RDMA's congestion control (Lu et al., "Multi-Path Transport
// for RDMA in Datacenters", NSDI 2018, §3.2–3.3, Algorithm 1): one
// congestion window for the whole connection, kept in packets and
// adjusted per ACK by its ECN echo, and multi-path ACK clocking.
//
//   - cwnd: an ACK without the echo adds 1/cwnd, one with it takes 1/2
//     (never below 1, never above MaxCwnd). Per path this is the DCTCP-like
//     rule the paper derives: a fully marked window halves in one RTT.
//     Losses do not move it (loss recovery is the schemes' business; the
//     paper's window is ECN-driven).
//   - ACK clocking: the packets an ACK lets the window send (cwnd − pipe,
//     less any released and not yet taken) go on the path the ACK came
//     back on, so each path carries what its own ACKs clock and a
//     congested path (fewer, marked ACKs) gets less; the sender keeps no
//     per-path state. Packets with no ACK behind them (the first window,
//     growth after idle, a rewind) spread round-robin over the paths.
//   - Out-of-order aware path selection: an ACK for a packet more than Δ
//     (SlowPathLag) behind the highest acknowledged one does not clock
//     its path; what it releases goes to a random other path (the
//     requester draws it). The paper replaces such a virtual path by a
//     fresh random one; with N fixed path addresses the slow path simply
//     gets nothing until a draw picks it again.
//
// The paper's window counts in-flight packets as snd_nxt − snd_una −
// inflate; here that count is the requester's pipe.
type window struct {
	cwnd    float64
	max     float64
	paths   int
	rr      int // the next path of the round-robin spread
	clocked ring.Ring[uint8]
}

func (w *window) init(cfg *Config) {
	w.max = float64(cfg.MaxCwnd)
	w.cwnd = min(float64(cfg.InitCwnd), w.max)
	w.paths = cfg.Paths
	// Reach the working size now: at most MaxCwnd credits are ever queued.
	for range cfg.MaxCwnd {
		w.clocked.Push(0)
	}
	w.clocked.Clear()
}

// open reports whether one more packet fits with pipe in flight.
func (w *window) open(pipe int) bool { return float64(pipe)+1 <= w.cwnd }

// onAck applies one ACK's ECN echo to cwnd.
func (w *window) onAck(ecn bool) {
	if ecn {
		w.cwnd = max(w.cwnd-0.5, 1)
	} else {
		w.cwnd = min(w.cwnd+1/w.cwnd, w.max)
	}
}

// clock releases onto path (−1: unknown, left to the round-robin) the
// packets the window allows with pipe in flight after an ACK. Credits
// beyond the window (it shrank) are dropped, oldest first.
func (w *window) clock(path, pipe int) {
	room := max(int(w.cwnd)-pipe, 0)
	for w.clocked.Len() > room {
		w.clocked.Pop()
	}
	if path < 0 {
		return
	}
	for n := room - w.clocked.Len(); n > 0; n-- {
		w.clocked.Push(uint8(path))
	}
}

// nextPath is the path the next window packet should take: the oldest
// ACK credit's, or the round-robin's (clocked false).
func (w *window) nextPath() (path int, clocked bool) {
	if w.clocked.Len() > 0 {
		return int(*w.clocked.Front()), true
	}
	return w.rr, false
}

// took records that the next window packet went on path.
func (w *window) took(path int, clocked bool) {
	if clocked {
		w.clocked.Pop()
		return
	}
	w.rr = (path + 1) % w.paths
}
