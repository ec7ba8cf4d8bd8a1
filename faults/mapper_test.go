package faults

import (
	"bytes"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/sim"
)

type mapperRig struct {
	c   *cluster.Cluster
	rec *Recorder
	m   *Mapper
	ct  *Controller
	in  *Injector
}

func newMapperRig(t *testing.T, plan string) *mapperRig {
	t.Helper()
	c, err := cluster.New(mrcC(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rec := NewRecorder(c.Loop, nil)
	in, err := NewInjector(c.Topo, c.Loop, mustPlan(t, plan), 1, rec)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMapper(c.Topo, c.Loop, MapperConfig{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	ct := NewController(c, m, rec)
	m.Start()
	ct.Start()
	in.Start()
	return &mapperRig{c, rec, m, ct, in}
}

// transferAvoids runs a transfer 0 → 15 on QPs from connect and reports
// the data frames the T0-side port p1.t0.0/6 sent meanwhile, and the EVs
// of the new QP on the denied path that are not DENIED.
func (r *mapperRig) transferAvoids(t *testing.T, connect func(a, b int) ([]cluster.Pair, error)) (frames uint64, notDenied int) {
	t.Helper()
	ps, err := connect(0, 15)
	if err != nil {
		t.Fatal(err)
	}
	q := ps[0].A.T.(*mrc.QP)
	for _, e := range q.EVStates() {
		if e.Plane == 1 && e.Choice == 2 && e.State != mrc.EVDenied {
			notDenied++
		}
	}
	port := r.c.Topo.Port("p1.t0.0/6")
	before := dataTx(port)
	src := r.c.Region(0, 8<<20, fill(5))
	dst := r.c.Region(15, 8<<20, nil)
	tr, err := r.c.StartTransfer(ps[0], src, dst, 8<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	r.c.Loop.RunWhile(func() bool { return !tr.Done() })
	if len(tr.Errors) > 0 || !bytes.Equal(src.Buf, dst.Buf) {
		t.Fatalf("transfer failed or corrupted: %v", tr.Errors)
	}
	return dataTx(port) - before, notDenied
}

func (r *mapperRig) report(t *testing.T) *FaultReport {
	t.Helper()
	r.rec.Finish()
	if len(r.rec.Faults) != 1 {
		t.Fatalf("%d fault reports", len(r.rec.Faults))
	}
	f := r.rec.Faults[0]
	t.Logf("fault %s: detect %v by %s, locate %v, deny %v; findings %v; denylist %v; probes %d sent, %d lost",
		f.Label, fmtNs(f.DetectNs), f.DetectBy, fmtNs(f.LocateNs), fmtNs(f.DenyNs), r.m.Findings(), r.ct.Denylist(), r.m.Sent, r.m.Lost)
	return f
}

// A T0–T1 link cut: Clustermapper names the right link within 5 ms of
// virtual time, the denylist reaches the NICs, and QPs avoid the link —
// new QPs only through the controller's Connect (cluster.DenyLink does not
// reach QPs created after it: the gap the controller covers).
func TestMapperLocatesHardLinkFailure(t *testing.T) {
	r := newMapperRig(t, `
events:
  - at: 3ms
    kind: link_down
    target: link:p1.t0.0-p1.t1.2
`)
	// Traffic on the link when it dies.
	ps, err := r.ct.Connect(0, 15)
	if err != nil {
		t.Fatal(err)
	}
	src := r.c.Region(0, 64<<20, fill(1))
	dst := r.c.Region(15, 64<<20, nil)
	r.c.Loop.At(2500*sim.Microsecond, func() { r.c.StartTransfer(ps[0], src, dst, 64<<20, 1<<20) })
	r.c.Loop.RunUntil(10 * sim.Millisecond)
	f := r.report(t)
	if f.LocateNs < 0 || time.Duration(f.LocateNs) > 5*time.Millisecond {
		t.Fatalf("located after %s, want ≤ 5 ms", fmtNs(f.LocateNs))
	}
	found := false
	for _, fd := range r.m.Findings() {
		if fd.Element == "p1.t0.0/6" && fd.Hard && fd.Kind == "t0_t1_link" {
			found = true
		} else {
			t.Errorf("spurious finding %v", fd)
		}
	}
	if !found || f.DenyNs < 0 {
		t.Fatalf("link not found or not denied")
	}
	// The QP that was running: its EVs on the path are DENIED.
	for _, e := range ps[0].A.T.(*mrc.QP).EVStates() {
		if e.Plane == 1 && e.Choice == 2 && e.State != mrc.EVDenied {
			t.Errorf("existing QP: EV %#x on the denied path is %v", e.EV, e.State)
		}
	}
	// New QPs: cluster.Connect alone does not inherit the denylist …
	_, nd := r.transferAvoids(t, r.c.Connect)
	t.Logf("a QP created by cluster.Connect after the push: %d EVs on the denied path not DENIED (the gap)", nd)
	if nd == 0 {
		t.Log("cluster.Connect now inherits denylists: the controller's re-apply is no longer needed")
	}
	// … the controller's Connect applies it at once.
	frames, nd := r.transferAvoids(t, r.ct.Connect)
	if nd != 0 || frames != 0 {
		t.Errorf("QP from the controller: %d EVs not denied, %d data frames on the denied link", nd, frames)
	}
}

// A gray link (1% loss both ways) is found as gray within 1 s, denied, and
// new traffic avoids it.
func TestMapperLocatesGrayLink(t *testing.T) {
	r := newMapperRig(t, `
events:
  - at: 10ms
    kind: loss
    target: link:p1.t0.0-p1.t1.2
    params: {rate: 1%}
`)
	r.c.Loop.RunWhile(func() bool {
		return r.c.Loop.Now() < 1010*sim.Millisecond && (len(r.rec.Faults) == 0 || r.rec.Faults[0].DenyNs < 0)
	})
	f := r.report(t)
	if f.LocateNs < 0 || time.Duration(f.LocateNs) > time.Second {
		t.Fatalf("gray link located after %s, want ≤ 1 s", fmtNs(f.LocateNs))
	}
	fs := r.m.Findings()
	if len(fs) != 1 || fs[0].Element != "p1.t0.0/6" || fs[0].Hard {
		t.Fatalf("findings %v, want one gray p1.t0.0/6", fs)
	}
	frames, nd := r.transferAvoids(t, r.ct.Connect)
	if nd != 0 || frames != 0 {
		t.Errorf("after the deny: %d EVs not denied, %d data frames on the gray link", nd, frames)
	}
}
