package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/verbs"
)

// fakeKind is a transport kind only this test binary knows: registered
// the way a new transport is, from one init function.
const fakeKind = "fake-test"

func init() {
	RegisterTransport(fakeKind, TransportKind{
		New: func(c *Cluster, e *endpoint.Engine, h, plane int, qpn uint32) (verbs.Transport, error) {
			return &fakeQP{qpn: qpn, plane: plane}, nil
		},
		SinglePlane: true,
		QPBytes:     func(config.TransportConfig) uint64 { return 1000 },
	})
}

// fakeQP is the least verbs.Transport: it connects and never sends.
type fakeQP struct {
	qpn          uint32
	plane        int
	state        verbs.QPState
	local, peers verbs.QPAttrs
}

func (q *fakeQP) QPN() uint32              { return q.qpn }
func (q *fakeQP) State() verbs.QPState     { return q.state }
func (q *fakeQP) Stats() verbs.QPStats     { return verbs.QPStats{} }
func (q *fakeQP) Deadline() (int64, bool)  { return 0, false }
func (q *fakeQP) Tick(int64)               {}
func (q *fakeQP) Receive(int64, *verbs.Rx) {}
func (q *fakeQP) Connect(local, remote verbs.QPAttrs) error {
	q.local, q.peers, q.state = local, remote, verbs.QPReady
	return nil
}
func (q *fakeQP) Post(int64, verbs.WorkRequest) error                       { return verbs.ErrNotReady }
func (q *fakeQP) Send(int64, uint32, []byte) (verbs.Tx, bool)               { return verbs.Tx{}, false }
func (q *fakeQP) PollCompletions(dst []verbs.Completion) []verbs.Completion { return dst }

// A registered kind is a valid transport.kind, and the cluster builds its
// QPs with the registered constructor (spread over the planes, as a
// single-plane kind's); no file of config knows it.
func TestRegisteredTransportKind(t *testing.T) {
	cfg := load(t, "fabric.preset=C", "fabric.hosts=16", "transport.kind="+fakeKind, "transport.qpsPerConnection=2")
	if k, ok := LookupTransport(fakeKind); !ok || !k.SinglePlane {
		t.Fatalf("LookupTransport(%q) = %+v, %v", fakeKind, k, ok)
	}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Connect(0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("%d pairs, want 2", len(ps))
	}
	for i, p := range ps {
		a, ok := p.A.T.(*fakeQP)
		b, ok2 := p.B.T.(*fakeQP)
		if !ok || !ok2 {
			t.Fatalf("pair %d: transports %T, %T, want the registered kind's", i, p.A.T, p.B.T)
		}
		if a.state != verbs.QPReady || a.peers.Host != 5 || b.peers.Host != 0 || a.plane != i || b.plane != i {
			t.Errorf("pair %d: A %+v, B %+v: want connected 0↔5 on plane %d", i, a, b, i)
		}
	}
	if e := EstimateMemory(cfg, 0); e.Hosts != 16*(memPerHost+memPerNetstack)+2*16*2*1000 {
		t.Errorf("memory estimate of the hosts %d: the kind's QPBytes not used", e.Hosts)
	}
}

// An unknown transport.kind is refused naming every registered kind.
func TestUnknownTransportKind(t *testing.T) {
	_, err := config.Load("", []string{"transport.kind=no-such"})
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Path != "transport.kind" {
		t.Fatalf("transport.kind=no-such: %v", err)
	}
	for _, k := range TransportKinds() {
		if !strings.Contains(err.Error(), `"`+k+`"`) {
			t.Errorf("%q does not list the registered kind %q", err, k)
		}
	}
	// config lists its sections' kinds first, in field order; the cluster
	// its registrations, in file order: the same kinds.
	want := []string{config.TransportMRC, config.TransportRoCE, config.TransportMPRDMA, config.TransportRandom, config.TransportOrderRE, fakeKind}
	if strings.Join(config.TransportKinds(), ",") != strings.Join(want, ",") {
		t.Errorf("kinds: config %v, want %v", config.TransportKinds(), want)
	}
	if got := slices.Sorted(slices.Values(TransportKinds())); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("kinds: cluster %v, want %v", TransportKinds(), want)
	}
}
