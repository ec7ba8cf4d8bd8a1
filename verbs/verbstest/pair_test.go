package verbstest

import (
	"slices"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// stub sends n packets (PSN 0..n-1, one byte of payload after the BTH)
// once connected, one per period ns when period > 0, and records what
// it receives.
type stub struct {
	qpn, peer uint32
	host      int
	n, next   int
	period    int64
	at        int64
	got       []uint32 // PSNs received, in order
	trimmed   []bool
}

func (s *stub) QPN() uint32                                             { return s.qpn }
func (s *stub) State() verbs.QPState                                    { return verbs.QPReady }
func (s *stub) Stats() verbs.QPStats                                    { return verbs.QPStats{} }
func (s *stub) Tick(int64)                                              {}
func (s *stub) Post(int64, verbs.WorkRequest) error                     { return nil }
func (s *stub) PollCompletions(d []verbs.Completion) []verbs.Completion { return d }
func (s *stub) Connect(l, r verbs.QPAttrs) error {
	s.peer, s.host = r.QPN, r.Host
	return nil
}

func (s *stub) Deadline() (int64, bool) { return s.at, s.period > 0 && s.next < s.n }

func (s *stub) Send(now int64, _ uint32, b []byte) (verbs.Tx, bool) {
	if s.next >= s.n || (s.period > 0 && now < s.at) {
		return verbs.Tx{}, false
	}
	clear(b[:16])
	b[0] = 1 // data
	b[5], b[6], b[7] = byte(s.peer>>16), byte(s.peer>>8), byte(s.peer)
	b[11] = byte(s.next)
	s.next++
	s.at = now + s.period
	return verbs.Tx{Len: 16, WireLen: 20, DstHost: s.host, DSCP: verbs.DSCPTrimmable}, true
}

func (s *stub) Receive(now int64, rx *verbs.Rx) {
	s.got = append(s.got, BTHPSN(rx.Data))
	s.trimmed = append(s.trimmed, rx.Trimmed)
}

func stubPair(t *testing.T, n int, period int64) (*Pair, *stub) {
	var a *stub
	tr := Transport{Name: "stub", MTU: 4,
		IsData:    func(b []byte) bool { return b[0] == 1 },
		HeaderLen: func([]byte) int { return 12 },
		New: func(_ *verbs.Memory, qpn uint32, _ uint64) verbs.Transport {
			s := &stub{qpn: qpn, period: period}
			if a == nil {
				a, s.n = s, n
			}
			return s
		}}
	return tr.NewPair(t, Config{}), a
}

func TestHooks(t *testing.T) {
	p, _ := stubPair(t, 6, 0)
	b := p.B.Q.(*stub)
	p.Drop(func(pk *Packet) bool { return pk.PSN == 1 })
	p.Duplicate(func(pk *Packet) bool { return pk.PSN == 2 })
	p.Reorder(func(pk *Packet) bool { return pk.PSN == 3 })
	p.Trim(func(pk *Packet) bool { return pk.DataSeq == 5 })
	p.Pump(p.A)
	p.RunUntilIdle(1e6)
	if want := []uint32{0, 2, 2, 4, 3, 5}; !slices.Equal(b.got, want) {
		t.Fatalf("B got %v, want %v", b.got, want)
	}
	if want := []bool{false, false, false, false, false, true}; !slices.Equal(b.trimmed, want) {
		t.Fatalf("trimmed %v, want %v", b.trimmed, want)
	}
	if w := p.Wire[AtoB]; w.Sent != 6 || w.Dropped != 1 || w.Duplicated != 1 || w.Reordered != 1 || w.Trimmed != 1 || w.Delivered != 6 {
		t.Fatalf("wire stats %+v", w)
	}
	if p.Now != 1000 {
		t.Fatalf("now %d, want one latency", p.Now)
	}
}

func TestDelayAndTimers(t *testing.T) {
	p, _ := stubPair(t, 3, 500) // one packet per 500 ns of Tick
	b := p.B.Q.(*stub)
	p.Delay(func(pk *Packet) bool { return pk.Seq == 0 }, 2000)
	p.Pump(p.A)
	end := p.RunUntilIdle(1e6)
	if want := []uint32{1, 2, 0}; !slices.Equal(b.got, want) {
		t.Fatalf("B got %v, want %v", b.got, want)
	}
	if end != 3000 { // PSN 0 sent at 0, delayed 2000
		t.Fatalf("idle at %d, want 3000", end)
	}
	if p.A.StaleDeadlines != 0 {
		t.Fatalf("%d stale deadlines", p.A.StaleDeadlines)
	}
}
