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
	// Every check runs at every size, and says which in its claim; with
	// RoCE 1 QP only, the claims about 8 and 16 QPs are not testable.
	at := map[string]int{}
	for _, c := range r.Checks {
		sz, _, _ := strings.Cut(c.Claim, ", ")
		at[sz]++
		if strings.Contains(c.Claim, "16 QPs") && c.Testable() {
			t.Errorf("check %q is testable without 16 QPs", c.Claim)
		}
	}
	if len(at) != 2 || at["4M"] == 0 || at["4M"] != at["8M"] {
		t.Errorf("checks per size %v, want the same claims at 4M and 8M", at)
	}

	// alltoall takes several sizes too.
	a, _ := Lookup("alltoall")
	if err := CheckParams(a, quickEnv(t, a, "size=4M,8M")); err != nil {
		t.Errorf("alltoall with two sizes: %v", err)
	}
}

// exp.roceFabric=paper puts RoCE on one plane carrying the whole NIC with
// PFC and the same hosts and T0/T1 shape, and leaves MRC alone;
// same-planes runs RoCE on MRC's planes. Bad values of it, exp.hosts and
// exp.scaleRanks are refused naming the parameter and what is allowed.
func TestRoCEFabric(t *testing.T) {
	for _, name := range []string{"allreduce-loss", "alltoall"} {
		e, _ := Lookup(name)
		for _, mode := range []string{"paper", "same-planes"} {
			env := quickEnv(t, e, "roceFabric="+mode, "hosts=32")
			g, err := transportGrid(env)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range g.vs {
				cfg, err := override(env.Config, v.sets)
				if err != nil {
					t.Fatalf("%s %s %s: %v", name, mode, v.name, err)
				}
				f := cfg.Fabric
				planes, speed, pfc := 4, "100G", false
				if !v.mrc && mode == "paper" {
					planes, speed, pfc = 1, "400G", true
				}
				if f.Planes != planes || f.HostLinkSpeed != speed || f.FabricLinkSpeed != speed || f.Queue.PFC.Enabled != pfc {
					t.Errorf("%s %s %s: %d × %s/%s, PFC %v; want %d × %s, PFC %v", name, mode, v.name, f.Planes, f.HostLinkSpeed, f.FabricLinkSpeed, f.Queue.PFC.Enabled, planes, speed, pfc)
				}
				if f.Hosts != 32 || f.HostsPerT0 != 4 || f.T0PerPlane != 8 || f.T1PerPlane != 4 {
					t.Errorf("%s %s %s: hosts %d = %d × %d T0s, %d T1s; want 32 = 4 × 8, 4 T1s", name, mode, v.name, f.Hosts, f.HostsPerT0, f.T0PerPlane, f.T1PerPlane)
				}
				if want := fabricCell(planes, speed, pfc); v.fabric != want {
					t.Errorf("%s %s %s: fabric cell %q, want %q", name, mode, v.name, v.fabric, want)
				}
			}
		}
		for _, bad := range []struct{ set, want string }{
			{"roceFabric=same", "exp.roceFabric: \"same\" is not allowed; must be one of paper, same-planes"},
			{"hosts=10", "exp.hosts: \"10\" is not a multiple of fabric.hostsPerT0 (4)"},
			{"hosts=1", "exp.hosts: \"1\" is not an integer in [2, 1024]"},
			{"hosts=x", "exp.hosts: \"x\" is not an integer"},
		} {
			if err := CheckParams(e, quickEnv(t, e, bad.set)); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("%s %s: %v, want %q", name, bad.set, err, bad.want)
			}
		}
	}
	a, _ := Lookup("alltoall")
	if err := CheckParams(a, quickEnv(t, a, "scaleRanks=16,30")); err == nil || !strings.Contains(err.Error(), "exp.scaleRanks: \"30\" is not a multiple of fabric.hostsPerT0 (4)") {
		t.Errorf("scaleRanks=16,30: %v", err)
	}
	if err := CheckParams(a, quickEnv(t, a, "scaleRanks=off", "scaleSize=junk")); err != nil {
		t.Errorf("scaleRanks=off ignores scaleSize: %v", err)
	}
}
