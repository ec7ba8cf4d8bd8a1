package cluster

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// Two ends made separately (as two processes make theirs) and connected
// by their published attributes carry a transfer, bytes intact, on MRC
// and on RoCE; RoCE's two ends agree on the plane whichever host asks.
func TestNewEndConnectEndTransfer(t *testing.T) {
	for _, kind := range []string{"mrc", "roce"} {
		t.Run(kind, func(t *testing.T) {
			sets := []string{"fabric.preset=C", "fabric.hosts=8", "transport.kind=" + kind, "transport.qpsPerConnection=3"}
			if kind == "roce" {
				sets = append(sets, "fabric.forwarding=ecmp")
			}
			c, err := New(load(t, sets...), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			const a, b = 1, 6
			planes := map[int]bool{}
			for i := range 3 {
				ea, err := c.NewEnd(a, b, i)
				if err != nil {
					t.Fatal(err)
				}
				eb, err := c.NewEnd(b, a, i)
				if err != nil {
					t.Fatal(err)
				}
				if ea.T.State() != verbs.QPReset {
					t.Fatalf("NewEnd's QP is %v before ConnectEnd, want RESET", ea.T.State())
				}
				// The exchange: each side gets the other's Attrs only.
				if err := c.ConnectEnd(eb, ea.Attrs()); err != nil {
					t.Fatal(err)
				}
				if err := c.ConnectEnd(ea, eb.Attrs()); err != nil {
					t.Fatal(err)
				}
				if err := c.ConnectEnd(ea, eb.Attrs()); err == nil {
					t.Error("ConnectEnd of a connected end succeeded")
				}
				if kind == "roce" {
					pa, pb := ea.T.(*roce.QP).Config().Plane, eb.T.(*roce.QP).Config().Plane
					if pa != pb || pa != c.RemotePlane(b, a, i) {
						t.Fatalf("QP %d: planes %d and %d, RemotePlane %d: the ends disagree", i, pa, pb, c.RemotePlane(a, b, i))
					}
					planes[pa] = true
				}
				src := c.Region(a, 1<<20, func(p []byte) {
					for j := range p {
						p[j] = byte(j*7 + i)
					}
				})
				dst := c.Region(b, 1<<20, nil)
				tr, err := c.StartTransfer(Pair{A: ea, B: eb}, src, dst, 1<<20, 64<<10)
				if err != nil {
					t.Fatal(err)
				}
				c.Loop.RunWhile(func() bool { return !tr.Done() })
				if !tr.Done() || len(tr.Errors) > 0 || tr.Completed != 1<<20 || tr.RecvImmAt == 0 {
					t.Fatalf("QP %d: done %v, %d errors, %d of %d bytes, WriteImm seen at %v", i, tr.Done(), len(tr.Errors), tr.Completed, 1<<20, tr.RecvImmAt)
				}
				if !bytes.Equal(src.Buf, dst.Buf) {
					t.Fatalf("QP %d: the destination's bytes differ from the source's", i)
				}
			}
			if kind == "roce" && len(planes) != 3 {
				t.Errorf("the connection's 3 QPs use planes %v, want 3 different ones", planes)
			}
		})
	}
}

func TestNewEndConnectEndRefuse(t *testing.T) {
	c, err := New(load(t, "fabric.preset=C", "fabric.hosts=4", "transport.qpsPerConnection=2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, tc := range []struct {
		h, peer, i int
		want       string
	}{{0, 0, 0, "hosts must differ"}, {-1, 1, 0, "hosts must differ"}, {0, 4, 0, "0..3"}, {0, 1, 2, "qpsPerConnection is 2"}, {0, 1, -1, "want 0..1"}} {
		if _, err := c.NewEnd(tc.h, tc.peer, tc.i); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewEnd(%d, %d, %d): error %v, want one saying %q", tc.h, tc.peer, tc.i, err, tc.want)
		}
	}
	e, err := c.NewEnd(0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		e      QPEnd
		remote verbs.QPAttrs
		want   string
	}{
		{QPEnd{}, verbs.QPAttrs{Host: 1, QPN: 0x100}, "not an end"},
		{e, verbs.QPAttrs{Host: 0, QPN: 0x100}, "peer host 0"},
		{e, verbs.QPAttrs{Host: 9, QPN: 0x100}, "peer host 9"},
		{e, verbs.QPAttrs{Host: 1, QPN: 3}, "peer QPN 0x3"},
		{e, verbs.QPAttrs{Host: 1, QPN: 1 << 24}, "peer QPN"},
	} {
		if err := c.ConnectEnd(tc.e, tc.remote); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ConnectEnd(%+v): error %v, want one saying %q", tc.remote, err, tc.want)
		}
	}
	if e.T.State() != verbs.QPReset {
		t.Errorf("a refused ConnectEnd left the QP %v, want RESET", e.T.State())
	}
	for a := range 4 {
		for b := range 4 {
			if c.RemotePlane(a, b, 1) != c.RemotePlane(b, a, 1) {
				t.Errorf("RemotePlane(%d, %d) ≠ RemotePlane(%d, %d)", a, b, b, a)
			}
		}
	}
}
