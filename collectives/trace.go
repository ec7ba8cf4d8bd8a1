package collectives

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/vcluster/vcluster/sim"
)

// Trace records every rank's steps as Chrome trace events (the JSON
// object format Perfetto and chrome://tracing open): one process per rank
// (pid = rank) with one thread (tid = rank) carrying the rank's program —
// a span per collective, and inside it wait, reduce and copy spans — plus
// an async span per write (cat "send", from post to completion) and an
// instant per notification received ("recv"). ts and dur are µs of
// virtual time.
//
// On the classic loop the events are recorded in the order they happen;
// on a partitioned cluster each rank records its own (ranks run on
// several goroutines) and they are written rank by rank, which is the same
// file for any number of partitions and workers.
type Trace struct {
	m       *Comm
	events  []traceEvent
	perRank bool // events go to rank.events
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   string         `json:"id,omitempty"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

func newTrace(m *Comm) *Trace { return &Trace{m: m, perRank: m.C.Parallel() != nil} }

func (t *Trace) add(r *rank, es ...traceEvent) {
	if t.perRank {
		r.events = append(r.events, es...)
		return
	}
	t.events = append(t.events, es...)
}

func us(t sim.Time) float64 { return float64(t) / 1e3 }

func (t *Trace) span(r *rank, name string, from, to sim.Time, args map[string]any) {
	d := us(to - from)
	t.add(r, traceEvent{Name: name, Cat: "step", Ph: "X", Ts: us(from), Dur: &d, Pid: r.id, Tid: r.id, Args: args})
}

func (t *Trace) send(r *rank, wrid uint64, s sendRec) {
	id := fmt.Sprintf("%d.%d", r.id, wrid)
	name := fmt.Sprintf("send→%d", s.peer)
	args := map[string]any{"peer": s.peer, "tag": s.tag, "bytes": s.n}
	t.add(r,
		traceEvent{Name: name, Cat: "send", Ph: "b", Ts: us(s.at), Pid: r.id, Tid: r.id, ID: id, Args: args},
		traceEvent{Name: name, Cat: "send", Ph: "e", Ts: us(r.loop.Now()), Pid: r.id, Tid: r.id, ID: id})
}

func (t *Trace) recv(r *rank, peer int, tag uint32, n uint64) {
	t.add(r, traceEvent{Name: fmt.Sprintf("recv←%d", peer), Cat: "recv", Ph: "i", S: "t",
		Ts: us(r.loop.Now()), Pid: r.id, Tid: r.id, Args: map[string]any{"peer": peer, "tag": tag, "bytes": n}})
}

// Events returns how many events were recorded.
func (t *Trace) Events() int { return len(t.all()) }

// all returns the recorded events in the order they are written.
func (t *Trace) all() []traceEvent {
	if !t.perRank {
		return t.events
	}
	var es []traceEvent
	for _, r := range t.m.ranks {
		es = append(es, r.events...)
	}
	return es
}

// Trace returns the communicator's trace (nil unless Options.Trace).
func (m *Comm) Trace() *Trace { return m.trace }

// WriteTrace writes the trace as {"traceEvents": [...]}, with a
// process_name and thread_name per rank.
func (t *Trace) WriteTrace(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
	enc := func(e traceEvent, last bool) error {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		bw.Write(b)
		if !last {
			bw.WriteString(",\n")
		}
		return nil
	}
	events := t.all()
	for _, r := range t.m.ranks {
		for _, md := range []struct{ name, v string }{{"process_name", fmt.Sprintf("rank %d (host %d)", r.id, r.host)}, {"thread_name", fmt.Sprintf("rank %d", r.id)}} {
			if err := enc(traceEvent{Name: md.name, Ph: "M", Pid: r.id, Tid: r.id, Args: map[string]any{"name": md.v}}, false); err != nil {
				return err
			}
		}
		if err := enc(traceEvent{Name: "process_sort_index", Ph: "M", Pid: r.id, Tid: r.id, Args: map[string]any{"sort_index": r.id}}, len(events) == 0 && r.id == len(t.m.ranks)-1); err != nil {
			return err
		}
	}
	for i, e := range events {
		if err := enc(e, i == len(events)-1); err != nil {
			return err
		}
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}
