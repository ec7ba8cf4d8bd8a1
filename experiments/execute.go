package experiments

import (
	"context"
	"fmt"
	"os"

	"github.com/vcluster/vcluster/wallclock"
)

// Execute runs e in env, writes the report directory dir (results, plots,
// report.md/html) and the manifest m completed with the experiment, its
// parameters, wall time and event count. before are extra report sections
// (e.g. `vcluster run`'s fabric preflight), head describes the cluster.
func Execute(ctx context.Context, e Experiment, env *Env, dir, head string, before []Section, m Manifest) (*Results, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	wall := wallclock.New()
	r, err := e.Run(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name(), err)
	}
	r.Before = append(before, r.Before...)
	files, err := WriteReport(dir, e, env, r, head)
	if err != nil {
		return r, err
	}
	ok, _ := r.Passed()
	m.Experiment, m.TargetRows, m.Size, m.Params = e.Name(), e.TargetRows(), env.Size, env.Params
	m.WallSeconds = float64(wall.Now()) / 1e9
	m.Events += r.Events
	m.ChecksPassed = &ok
	m.Files = append(m.Files, append(files, "manifest.json")...)
	if m.Status == "" {
		m.Status = fmt.Sprintf("experiment %s (%s) ran; checks: %s", e.Name(), env.Size, verdicts(r))
	}
	m.Seed = env.Config.Seed
	m.Config = env.Config
	return r, WriteManifest(dir, m)
}

func verdicts(r *Results) string {
	p, d := 0, 0
	for _, c := range r.Checks {
		if c.Pass {
			p++
		} else {
			d++
		}
	}
	return fmt.Sprintf("%d pass, %d differ", p, d)
}
