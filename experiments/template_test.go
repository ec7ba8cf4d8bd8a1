package experiments

// docs/experiments.md's template: an experiment registered only in this
// test binary, and its test (a real one calls Register from init).

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

type goodputParams struct{ bytes uint64 } // the parameters, read and checked

var goodputExperiment = &Experiment{
	Name: "template-goodput", Title: "one flow's goodput against the line rate", Targets: []string{"T1"},
	Setup:   "Host 0 writes exp.bytes to host 1 (same T0) over one MRC QP: goodput over the NIC's line rate.",
	Cluster: paperCluster("fabric.preset=C", "fabric.hosts=16"),
	Params:  []Param{{Key: "bytes", Default: "32M", Quick: "8M", Doc: "bytes of the flow"}},
	Args: Typed[goodputParams]{Run: runGoodput, Read: func(env *Env) (goodputParams, error) {
		r := newParamReader(env) // every bad value, as exp.<key>: …; must be …
		p := goodputParams{bytes: r.size("bytes")}
		return p, r.err()
	}},
}

func runGoodput(ctx context.Context, env *Env, p goodputParams) (*Results, error) {
	cfg, err := override(env.Config, mrcSets(1))
	if err != nil {
		return nil, err
	}
	env.Point(0, 1, "MRC, 1 QP")
	c, err := env.NewCluster(cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	env.Watch(c)
	trs, err := startFlow(c, 0, 1, p.bytes)
	if err != nil {
		return nil, err
	}
	c.RunWhile(func() bool { return !trs[0].Done() })
	res := &Results{Events: c.Executed(), Points: 1}
	if !trs[0].Done() || len(trs[0].Errors) > 0 {
		res.Failed = append(res.Failed, "MRC, 1 QP: the flow did not complete")
	}
	frac := trs[0].GoodputBps() / (float64(cfg.Fabric.HostLinkBps()) * float64(cfg.Fabric.Planes))
	res.Row(C("transport", "MRC, 1 QP").Show("transport", "MRC, 1 QP"), C("bytes", strconv.FormatUint(p.bytes, 10)),
		C("fraction_of_line_rate", f4(frac)).Show("of line rate (%)", pctCell(frac)))
	res.Table = res.table.Text()
	res.Checks = []Check{bandCheck("T1", "one flow on an idle path reaches line rate", "~96% of line rate",
		Between(85, 96.1, "%", "the header ceiling (4096 B of payload per 4262 B on the wire) less a finite flow's start-up: "+
			"an RTT and the NIC latency once, ~5% of 8 MiB at 400G"), 100*frac, fmt.Sprintf("%.1f%% of line rate", 100*frac))}
	return res, nil
}

func TestTemplateExperiment(t *testing.T) {
	Register(goodputExperiment)
	defer delete(registry, goodputExperiment.Name)
	e, err := Lookup(goodputExperiment.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckParams(e, quickEnv(t, e, "bytes=0")); err == nil || !strings.Contains(err.Error(), "exp.bytes: ") {
		t.Errorf("exp.bytes=0: %v, want refused naming exp.bytes", err)
	}
	dir := t.TempDir()
	r, err := Execute(context.Background(), e, quickEnv(t, e), dir, "test", nil, Manifest{Tool: "vcluster"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, bad := r.Passed(); !ok {
		t.Errorf("the template's check differs: %v\n%s", bad, r.Table)
	}
}
