package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// ErrInterrupted is what Execute returns (wrapped) for a run stopped by
// sim.Interrupt or a cancelled ctx: its manifest says "interrupted", and
// whatever results the run had are written.
var ErrInterrupted = errors.New("interrupted")

// StatusInterrupted is the manifest status of an interrupted run.
const StatusInterrupted = "interrupted"

// interrupted reports whether the run was stopped from outside: a signal
// (sim.Interrupt) or a cancelled ctx.
func interrupted(ctx context.Context) bool { return sim.Interrupted() || ctx.Err() != nil }

// Execute runs e in env, writes the report directory dir (results, plots,
// report.md/html) and the manifest m completed with the experiment, its
// parameters, wall time and event count. before are extra report sections
// (e.g. `vcluster run`'s fabric preflight), head describes the cluster.
//
// The parameters are checked (CheckParams) before anything is created. A
// run that fails leaves a manifest whose status says why ("failed: …"),
// never "started"; a run with failed points (Results.Failed) writes its
// whole report and returns a *FailedError; an interrupted run (sim.Interrupt,
// ctx cancelled) writes status "interrupted" and what results it has, and
// returns an error wrapping ErrInterrupted, whatever its points did.
func Execute(ctx context.Context, e *Experiment, env *Env, dir, head string, before []Section, m Manifest) (*Results, error) {
	if err := CheckParams(e, env); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	wall := wallclock.New()
	r, err := RunSeeds(ctx, e, env)
	m.Experiment, m.TargetRows, m.Size, m.Params = e.Name, e.Targets, env.Size, env.Params
	m.Seed = env.Config.Seed
	m.Seeds = env.seeds()
	m.Parallel = env.Parallel
	m.Config = env.Config
	finish := func(status string) error {
		m.WallSeconds = float64(wall.Now()) / 1e9
		m.Status = status
		m.Files = append(m.Files, "manifest.json")
		return WriteManifest(dir, m)
	}
	if interrupted(ctx) {
		if r != nil && len(r.Rows) > 0 {
			// Partial results: what completed, without a verdict.
			r.Checks = nil
			r.Notes = "**Interrupted**: only the points that completed before the interrupt are shown; the checks were not judged.\n\n" + r.Notes
			r.Before = append(before, r.Before...)
			files, rerr := WriteReport(dir, e, env, r, head)
			if rerr != nil {
				_ = finish(StatusInterrupted)
				return r, fmt.Errorf("%s: %w (and the partial report could not be written: %v)", e.Name, ErrInterrupted, rerr)
			}
			m.Files = append(m.Files, files...)
			m.Events += r.Events
		}
		if werr := finish(StatusInterrupted); werr != nil {
			return r, werr
		}
		return r, fmt.Errorf("%s: %w", e.Name, ErrInterrupted)
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", e.Name, err)
		if werr := finish("failed: " + err.Error()); werr != nil {
			return nil, errors.Join(err, werr)
		}
		return nil, err
	}
	r.Before = append(before, r.Before...)
	files, err := WriteReport(dir, e, env, r, head)
	if err != nil {
		return r, err
	}
	ok, _ := r.Passed()
	m.Events += r.Events
	m.ChecksPassed = &ok
	m.Files = append(m.Files, files...)
	status := m.Status
	if status == "" {
		status = fmt.Sprintf("experiment %s (%s) ran; checks: %s", e.Name, env.Size, verdicts(r))
	}
	var failed error
	if len(r.Failed) > 0 {
		fe := &FailedError{Experiment: e.Name, Failed: r.Failed, Points: max(r.Points, len(r.Failed))}
		status, failed = "failed: "+fe.Error(), fe
	}
	if err := finish(status); err != nil {
		return r, err
	}
	return r, failed
}

func verdicts(r *Results) string { return verdictCounts(r.Checks).String() }

// verdictCount counts a check table's verdicts.
type verdictCount struct{ pass, differ, untestable int }

func verdictCounts(cs []Check) verdictCount {
	var v verdictCount
	for _, c := range cs {
		v.add(c)
	}
	return v
}

func (v *verdictCount) add(c Check) {
	switch {
	case !c.Testable():
		v.untestable++
	case c.Pass:
		v.pass++
	default:
		v.differ++
	}
}

func (v verdictCount) String() string {
	s := fmt.Sprintf("%d pass, %d differ", v.pass, v.differ)
	if v.untestable > 0 {
		s += fmt.Sprintf(", %d not testable", v.untestable)
	}
	return s
}

// SeedColumn is the column RunSeeds adds to every experiment's
// results.csv: the seed of the run the row came from.
const SeedColumn = "seed"

// DefaultSeeds is how many seeds an experiment's checks run on unless
// --seeds says otherwise: the fewest whose median is not one run's luck.
const DefaultSeeds = 3

// MaxSeeds bounds --seeds.
const MaxSeeds = 16

// seeds is how many seeds a run of env uses (Seeds, at least 1).
func (e *Env) seeds() int { return max(e.Seeds, 1) }

// RunSeeds runs e once per seed of env: the config's seed s, then s+1, …
// (env.Seeds runs, at least one), each with the ECMP hash seed moved by
// the same step, so that hashing luck varies with the seed like loss and
// EVs do. It returns the first seed's table, plots, notes and files, every
// seed's rows (with a seed column) and points, and the checks merged over
// the seeds (mergeChecks: the median of the seeds' values judged against
// each claim's band). An error or an interrupt ends the runs: what the
// completed seeds produced is returned with it.
func RunSeeds(ctx context.Context, e *Experiment, env *Env) (*Results, error) {
	n := env.seeds()
	var out *Results
	var runs [][]Check
	var seeds []uint64
	for k := 0; k < n; k++ {
		ek := *env
		ek.Config.Seed = env.Config.Seed + uint64(k)
		ek.Config.Fabric.ECMPSeed = env.Config.Fabric.ECMPSeed + uint64(k)
		if n > 1 && env.Observer != nil {
			ek.Observer = seedObserver{env.Observer, k, n, ek.Config.Seed}
		}
		r, err := e.run(ctx, &ek)
		if r != nil {
			if !slices.Contains(r.Columns, SeedColumn) {
				r.Columns = append(slices.Clip(r.Columns), SeedColumn)
				for i := range r.Rows {
					r.Rows[i] = append(slices.Clip(r.Rows[i]), strconv.FormatUint(ek.Config.Seed, 10))
				}
			}
			if n > 1 {
				for i, f := range r.Failed {
					r.Failed[i] = fmt.Sprintf("seed %d: %s", ek.Config.Seed, f)
				}
			}
			if out == nil {
				out = r
			} else {
				out.Rows = append(out.Rows, r.Rows...)
				out.Events += r.Events
				out.Failed = append(out.Failed, r.Failed...)
				out.Points += r.Points
			}
			runs, seeds = append(runs, r.Checks), append(seeds, ek.Config.Seed)
		}
		if err != nil || interrupted(ctx) {
			if out != nil {
				out.Checks = mergeChecks(runs, seeds)
			}
			return out, err
		}
	}
	out.Checks = mergeChecks(runs, seeds)
	return out, nil
}

// seedObserver numbers the points of seed k of n after those of the
// seeds before it, and names the seed in each label.
type seedObserver struct {
	Observer
	k, n int
	seed uint64
}

func (o seedObserver) Point(i, n int, label string) {
	o.Observer.Point(o.k*n+i, o.n*n, fmt.Sprintf("seed %d: %s", o.seed, label))
}

// ReadManifest reads a manifest.json for a replay. Decoding is strict: an
// unknown field or a value of the wrong type is an error naming it.
func ReadManifest(path string) (Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, err
	}
	return DecodeManifest(path, b)
}

// DecodeManifest is ReadManifest of the bytes b read from path (path only
// names it in errors).
func DecodeManifest(path string, b []byte) (Manifest, error) {
	var present map[string]json.RawMessage
	if err := json.Unmarshal(b, &present); err != nil {
		return Manifest{}, fmt.Errorf("%s: not a JSON object: %v", path, err)
	}
	var m Manifest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Manifest{}, fmt.Errorf("%s: %s: want a JSON %s, got %s", path, te.Field, te.Type, te.Value)
		}
		return Manifest{}, fmt.Errorf("%s: %v", path, err)
	}
	var errs []error
	for _, k := range []string{"tool", "seed", "experiment", "size", "params", "config"} {
		if _, ok := present[k]; !ok {
			reason := "missing"
			if k == "experiment" || k == "size" || k == "params" {
				reason += " (a manifest is complete only when its run finished)"
			}
			errs = append(errs, &config.FieldError{Path: k, Reason: reason})
		}
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(present["params"], &params) == nil {
		var keys []string
		for k, v := range params {
			if string(bytes.TrimSpace(v)) == "null" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = append(errs, &config.FieldError{Path: "params." + k, Reason: "want a JSON string, got null"})
		}
	}
	if len(errs) > 0 {
		return m, errors.Join(errs...)
	}
	return m, nil
}

// Replay checks that m records a finished experiment run that can be run
// again and returns the experiment and the validated config. Every problem
// is named by its manifest field.
func (m Manifest) Replay() (*Experiment, config.Config, error) {
	var errs []error
	bad := func(path, reason string, v any) {
		errs = append(errs, &config.FieldError{Path: path, Reason: reason, Value: v})
	}
	if m.Tool != "vcluster" {
		bad("tool", `must be "vcluster"`, m.Tool)
	}
	e, err := Lookup(m.Experiment)
	if err != nil {
		bad("experiment", err.Error(), nil)
	}
	switch m.Size {
	case Quick, Default, Full:
	default:
		bad("size", "must be quick, default or full", string(m.Size))
	}
	if e != nil {
		known := map[string]bool{}
		for _, p := range e.Params {
			known[p.Key] = true
			if _, ok := m.Params[p.Key]; !ok {
				bad("params."+p.Key, "missing ("+e.Name+" has this parameter)", nil)
			}
		}
		var keys []string
		for k := range m.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !known[k] {
				bad("params."+k, e.Name+" has no such parameter", nil)
			}
		}
	}
	if m.Seed != m.Config.Seed {
		bad("seed", fmt.Sprintf("disagrees with config.seed (%d)", m.Config.Seed), m.Seed)
	}
	cfg, err := override(m.Config, nil)
	if err != nil {
		for _, x := range unjoin(err) {
			var fe *config.FieldError
			if errors.As(x, &fe) {
				bad("config."+fe.Path, fe.Reason, fe.Value)
			} else {
				bad("config", x.Error(), nil)
			}
		}
	} else if !reflect.DeepEqual(cfg, m.Config) {
		bad("config", "is not a resolved config (validating it changes it)", nil)
	}
	if len(errs) > 0 {
		return nil, config.Config{}, errors.Join(errs...)
	}
	return e, cfg, nil
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
