package endpoint

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/verbs"
)

// pathQP is a verbs.Transport that sends one packet per entry of paths,
// each with Tx.DstPath / Tx.SrcPath as given, and records what arrives:
// the seam multipath transports (mprdma) address paths through.
type pathQP struct {
	qpn, remoteQPN uint32
	remoteHost     int
	ev             uint32
	paths          [][2]uint16 // DstPath, SrcPath of each packet to send
	got            [][2]uint16 // Rx.DstPath, Rx.SrcPath of each arrival
}

func (q *pathQP) QPN() uint32          { return q.qpn }
func (q *pathQP) State() verbs.QPState { return verbs.QPReady }
func (q *pathQP) Stats() verbs.QPStats { return verbs.QPStats{} }
func (q *pathQP) Connect(_, r verbs.QPAttrs) error {
	q.remoteQPN, q.remoteHost = r.QPN, r.Host
	return nil
}
func (q *pathQP) Post(int64, verbs.WorkRequest) error { return nil }
func (q *pathQP) Send(_ int64, free uint32, b []byte) (verbs.Tx, bool) {
	if len(q.paths) == 0 || free&(1<<(q.ev&0xf)) == 0 {
		return verbs.Tx{}, false
	}
	p := q.paths[0]
	q.paths = q.paths[1:]
	clear(b[:verbs.BTHLen])
	b[0] = 0x0a
	b[5], b[6], b[7] = byte(q.remoteQPN>>16), byte(q.remoteQPN>>8), byte(q.remoteQPN)
	return verbs.Tx{Len: verbs.BTHLen, WireLen: verbs.BTHLen + 4, DstHost: q.remoteHost, EV: q.ev,
		DSCP: verbs.DSCPRoCE, DstPath: p[0], SrcPath: p[1]}, true
}
func (q *pathQP) Receive(_ int64, rx *verbs.Rx) {
	q.got = append(q.got, [2]uint16{rx.DstPath, rx.SrcPath})
}
func (q *pathQP) Deadline() (int64, bool) { return 0, false }
func (q *pathQP) Tick(int64)              {}
func (q *pathQP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	return dst
}

// A Tx with DstPath / SrcPath leaves with those path addresses in its IPv6
// header (fabric.HostPathAddr), crosses the spine its destination path
// names (path mod t1 under ECMP and static forwarding, whatever the EV's
// hash), and arrives with Rx.DstPath / SrcPath filled; 0 is the plain host
// address in both directions.
func TestPathAddressesRoundTrip(t *testing.T) {
	for _, mode := range []fabric.ForwardingMode{fabric.ForwardECMP, fabric.ForwardStatic} {
		t.Run(mode.String(), func(t *testing.T) {
			n := newTestNet(t, mode, 5)
			const a, b, plane = 0, 3, 1 // different T0s
			ea, eb := n.hosts[a].RDMA(), n.hosts[b].RDMA()
			ev := uint32(MakeEV(plane, 0, 0x1234)) // one hash: ECMP alone would keep one spine
			qa := &pathQP{qpn: ea.AllocQPN(), ev: ev}
			qb := &pathQP{qpn: eb.AllocQPN(), ev: ev}
			ea.AddQP(qa, &CQ{})
			eb.AddQP(qb, &CQ{})
			if err := Connect(ea, qa, verbs.QPAttrs{}, eb, qb, verbs.QPAttrs{}); err != nil {
				t.Fatal(err)
			}
			sent := [][2]uint16{{1, 0}, {2, 0}, {3, 7}, {4, 2}, {0, 0}, {0, 5}, {65535, 1}}
			qa.paths = append([][2]uint16(nil), sent...)
			type seen struct {
				t1       string
				src, dst [16]byte
			}
			var trace []seen
			for _, s := range n.topo.Switches {
				if s.Tier == 1 {
					s.Trace = func(sw *fabric.Switch, p *fabric.Packet, _ *fabric.Port) {
						var x seen
						x.t1 = sw.Name
						copy(x.src[:], p.Src())
						copy(x.dst[:], p.Dst())
						trace = append(trace, x)
					}
				}
			}
			if err := ea.Post(qa.QPN(), verbs.WorkRequest{}); err != nil { // wakes the QP: it sends its paths
				t.Fatal(err)
			}
			n.loop.Run()
			if fmt.Sprint(qb.got) != fmt.Sprint(sent) {
				t.Fatalf("arrived with (DstPath, SrcPath) %v, want %v", qb.got, sent)
			}
			if len(trace) != len(sent) {
				t.Fatalf("%d packets crossed a T1, want %d", len(trace), len(sent))
			}
			t1s := map[string]bool{}
			for i, p := range sent {
				want := func(h int, path uint16) [16]byte {
					if path == 0 {
						return n.topo.HostAddr(h, plane)
					}
					return n.topo.HostPathAddr(h, plane, int(path)-1)
				}
				if w := want(b, p[0]); !bytes.Equal(trace[i].dst[:], w[:]) {
					t.Errorf("packet %d: destination %x, want %x", i, trace[i].dst, w)
				}
				if w := want(a, p[1]); !bytes.Equal(trace[i].src[:], w[:]) {
					t.Errorf("packet %d: source %x, want %x", i, trace[i].src, w)
				}
				if p[0] == 0 {
					continue
				}
				// Path k−1 crosses T1 (k−1) mod 2 of the plane.
				wantT1 := fmt.Sprintf("p%d.t1.%d", plane, (int(p[0])-1)%testSpec.T1)
				if trace[i].t1 != wantT1 {
					t.Errorf("packet %d (path %d): crossed %s, want %s", i, p[0]-1, trace[i].t1, wantT1)
				}
				t1s[trace[i].t1] = true
			}
			if len(t1s) != testSpec.T1 {
				t.Errorf("path addresses crossed %v, want all %d T1s", t1s, testSpec.T1)
			}
			if n.topo.Pool.Live != 0 {
				t.Fatalf("%d packets leaked", n.topo.Pool.Live)
			}
		})
	}
}
