package mprdma

import (
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// responder is a QP's receiving half: the receive bitmap, out-of-order
// placement, per-packet ACKs with piggybacked signals, loss detection,
// NAKs/FNACKs and the per-PSN repair timer. (Skeleton: the API the
// requester half calls; the body follows.)
type responder struct {
	cfg   *Config
	mem   *verbs.Memory
	stats *Stats
	local verbs.QPAttrs
	peer  verbs.QPAttrs
	fail  error
}

func (r *responder) init(cfg *Config, mem *verbs.Memory, stats *Stats) {
	r.cfg, r.mem, r.stats = cfg, mem, stats
}

func (r *responder) connect(local, peer verbs.QPAttrs) { r.local, r.peer = local, peer }

func (r *responder) receive(now int64, rx *verbs.Rx, p *roce.Packet) {}

func (r *responder) nextControl(now int64, buf []byte) (verbs.Tx, bool) { return verbs.Tx{}, false }

func (r *responder) deadline() (int64, bool) { return 0, false }

func (r *responder) tick(now int64) {}

func (r *responder) pollCompletions(dst []verbs.Completion) []verbs.Completion { return dst }

func (r *responder) err() error { return r.fail }

func (r *responder) fill(s *verbs.QPStats) {}

func (r *responder) pollRepairs(dst []Repair) []Repair { return dst }
