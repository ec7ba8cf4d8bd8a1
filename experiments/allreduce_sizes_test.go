package experiments

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A two-size allreduce-loss run has a row per size, counts both sizes in
// its progress points, checks at the larger size, and plots busbw against
// size (and writes that plot); alltoall refuses a list.
func TestAllreduceLossSizes(t *testing.T) {
	e, _ := Lookup("allreduce-loss")
	env := quickEnv(t, e, "size=8M,4M", "roceQPs=1", "losses=0")
	rec := &recorder{}
	env.Observer = rec
	dir := t.TempDir()
	r, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	rec.check(t)
	if rec.n != 4 || len(rec.points) != 4 {
		t.Errorf("points %v of %d, want 4", rec.points, rec.n)
	}
	col := slices.Index(r.Columns, "size")
	if col < 0 || !slices.Equal(r.Columns[:4], []string{"transport", "qps", "loss", "ranks"}) {
		t.Fatalf("columns %v", r.Columns)
	}
	var got []string
	for _, row := range r.Rows {
		got = append(got, row[0]+"@"+row[col])
	}
	if want := []string{"MRC, 1 QP@4M", "RoCE, 1 QP@4M", "MRC, 1 QP@8M", "RoCE, 1 QP@8M"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	var names []string
	for _, p := range r.Plots {
		names = append(names, p.Name)
		if p.Name != "busbw_vs_size" {
			continue
		}
		if !slices.Equal(p.XLabels, []string{"4M", "8M"}) || len(p.Series) != 2 {
			t.Fatalf("busbw_vs_size: x labels %v, %d series", p.XLabels, len(p.Series))
		}
		for _, s := range p.Series {
			if !slices.Equal(s.X, []float64{0, 1}) || len(s.Y) != 2 || s.Y[0] <= 0 || s.Y[1] <= 0 {
				t.Errorf("busbw_vs_size series %+v", s)
			}
		}
	}
	if !slices.Equal(names, []string{"busbw_vs_loss", "busbw_vs_size"}) {
		t.Errorf("plots %v", names)
	}
	for _, f := range []string{"busbw_vs_size.png", "busbw_vs_size.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if len(r.Checks) == 0 {
		t.Error("no checks")
	}
	for _, c := range r.Checks {
		if !strings.HasPrefix(c.Measured, "at 8M: ") {
			t.Errorf("check %q measured %q, want it at 8M", c.Claim, c.Measured)
		}
	}

	a, _ := Lookup("alltoall")
	if _, err := a.Run(context.Background(), quickEnv(t, a, "size=4M,8M")); err == nil || !strings.Contains(err.Error(), "alltoall takes one size") {
		t.Errorf("alltoall with two sizes: %v", err)
	}
}
