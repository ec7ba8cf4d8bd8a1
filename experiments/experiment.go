package experiments

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// Size selects how big an experiment runs: Quick for tests and a first
// look, Default for `vcluster run` and `vcluster experiment <name>`, Full
// for the closest scale to the published setup this simulator affords.
type Size string

const (
	Quick   Size = "quick"
	Default Size = "default"
	Full    Size = "full"
)

// Param is one experiment setting, overridable with --set exp.<Key>=value.
// Quick and Full fall back to Default when empty.
type Param struct {
	Key, Default, Quick, Full, Doc string
}

// Value is p's value at size s.
func (p Param) Value(s Size) string {
	switch {
	case s == Quick && p.Quick != "":
		return p.Quick
	case s == Full && p.Full != "":
		return p.Full
	}
	return p.Default
}

// Experiment is one experiment of the catalogue, as data: what it is called and
// reproduces, the cluster it runs on, its parameters and its run. Each
// experiment's file registers one (Register, from init); docs/experiments.md
// says how to add one. An Experiment owns nothing of a run: every value a run
// produces is a function of the config, the parameters and the seed.
type Experiment struct {
	// Name is the catalogue's name (`vcluster experiment <name>`), Title
	// one line saying what it measures.
	Name, Title string
	// Targets names the TARGETS.md rows it reproduces, e.g. "T2", "T3".
	Targets []string
	// Setup is the report's description of the setup (markdown).
	Setup string
	// Cluster are the config overrides applied before the user's --config
	// and --set (paperCluster: the paper's timing first).
	Cluster []string
	// Params are its parameters with their values per size and the help
	// text `vcluster experiment list` prints.
	Params []Param
	// Args reads the parameters into typed values, checks them and runs:
	// a Typed[P].
	Args Args
}

// Args is how an Experiment reads, checks and runs with its parameters; Typed is
// the one implementation.
type Args interface {
	// bind reads and checks env.Params (and what they need of env.Config)
	// and returns the run bound to the values read. It runs nothing.
	bind(env *Env) (bound, error)
}

// bound is a run with its parameters read: Typed.Run with its P, and the
// payload memory its largest point needs.
type bound struct {
	run     func(ctx context.Context, env *Env) (*Results, error)
	payload uint64
}

// Typed is an experiment's parameters read into a P (a struct of typed
// values: sizes, rates, durations, the cells they make) and the run that
// takes them.
type Typed[P any] struct {
	// Read reads env.Params into a P, reporting every bad value (not only
	// the first) as "exp.<key>: <value> <reason>; must be <range>"
	// (paramReader). It is the one place parameters are checked: Execute
	// and the CLI call it before anything runs or is written, and every
	// seed's run gets what it returned.
	Read func(env *Env) (P, error)
	// Run runs one seed (env.Config.Seed) with p.
	Run func(ctx context.Context, env *Env, p P) (*Results, error)
	// Payload, for an experiment that carries real payload bytes, is the
	// registered memory (source, destination and scratch buffers) one host
	// needs at p's largest point, 0 when every point elides the payload;
	// nil for an experiment that never carries any.
	Payload func(p P) uint64
}

func (t Typed[P]) bind(env *Env) (bound, error) {
	p, err := t.Read(env)
	if err != nil {
		return bound{}, err
	}
	b := bound{run: func(ctx context.Context, env *Env) (*Results, error) { return t.Run(ctx, env, p) }}
	if t.Payload != nil {
		b.payload = t.Payload(p)
	}
	return b, nil
}

// run reads s's parameters from env and runs one seed.
func (s *Experiment) run(ctx context.Context, env *Env) (*Results, error) {
	b, err := s.Args.bind(env)
	if err != nil {
		return nil, err
	}
	return b.run(ctx, env)
}

// Env is what a run gets: the resolved cluster config, the resolved
// parameters and where to say how it is going (may be io.Discard).
type Env struct {
	Config   config.Config
	Size     Size
	Params   map[string]string
	Progress io.Writer
	// Observer, if set, follows the run (progress bar, metrics). Runs tell
	// it about their points and clusters through Env.Point and Env.Watch,
	// which do nothing when it is nil.
	Observer Observer
	// Parallel is --parallel: 0 builds classic single-loop clusters, N ≥ 1
	// partitioned ones run on N goroutines (cluster.NewForWorkers), whose
	// results are the same for every N.
	Parallel int
	// Seeds is --seeds: how many seeds RunSeeds runs (0 and 1: one). Run
	// itself always runs one seed, Config.Seed.
	Seeds int
	// Beside names the files the command writes into the run directory
	// beside the experiment's own (counters.csv, a capture), for the
	// report's list of files.
	Beside []string
}

// NewCluster builds the cluster for one point of a run: classic, or
// partitioned with env.Parallel workers.
func (e *Env) NewCluster(cfg config.Config) (*cluster.Cluster, error) {
	n := 0
	if e != nil {
		n = e.Parallel
	}
	return cluster.NewForWorkers(cfg, n)
}

// Observer follows a run for progress displays and metrics. Its methods
// are called on the goroutine that runs the simulation, so they may read
// the cluster's counters (and install c.Loop.OnProgress); nothing a run
// computes may depend on them.
type Observer interface {
	// Point says the run is starting point i (counting from 0) of n, e.g.
	// one transport × loss cell of a grid.
	Point(i, n int, label string)
	// Watch says c is the cluster being simulated from now on.
	Watch(c *cluster.Cluster)
}

// Point tells the observer, if any, that point i (from 0) of n starts.
// Calling it is optional: it only feeds progress displays.
func (e *Env) Point(i, n int, label string) {
	if e != nil && e.Observer != nil {
		e.Observer.Point(i, n, label)
	}
}

// Watch tells the observer, if any, that c is now being simulated (call it
// after cluster.New, before running the loop). Optional, like Point.
func (e *Env) Watch(c *cluster.Cluster) {
	if e != nil && e.Observer != nil && c != nil {
		e.Observer.Watch(c)
	}
}

func (e *Env) logf(format string, a ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format, a...)
	}
}

// Check is one line of the check table: a claim from a TARGETS row, what
// the row says, the band a measurement must fall in to reproduce it, and
// what was measured. A run states each claim once with its Value; RunSeeds
// runs every seed and merges them (mergeChecks): Values per seed, their
// Median judged against the Band. A claim this setup cannot test says why
// in NotTestable and is neither a pass nor a difference.
type Check struct {
	Target   string `json:"target"`
	Claim    string `json:"claim"`
	Expected string `json:"expected"`
	// Band is where the median must lie; nil on a run's check is a yes/no
	// claim judged by Pass.
	Band *Band `json:"band,omitempty"`
	// Value is this run's measurement in Band's unit (the median, once
	// merged); NaN when the run could not measure it.
	Value float64 `json:"-"`
	// Measured is the first seed's measurement in words (the detail).
	Measured string `json:"measured"`
	// Seeds and Values are every seed's measurement, Median their median.
	Seeds  []uint64  `json:"seeds,omitempty"`
	Values []float64 `json:"values,omitempty"`
	Median float64   `json:"median"`
	// NotTestable is why this setup cannot test the claim ("" if it can).
	NotTestable string `json:"notTestable,omitempty"`
	Pass        bool   `json:"pass"`
}

// Verdict is "pass", "differs" or "not testable here: <reason>".
func (c Check) Verdict() string {
	switch {
	case c.NotTestable != "":
		return "not testable here: " + c.NotTestable
	case c.Pass:
		return "pass"
	}
	return "differs"
}

// Testable reports whether the setup can test c's claim.
func (c Check) Testable() bool { return c.NotTestable == "" }

// Series is one line of a plot.
type Series struct {
	Name string    `json:"name"`
	X    []float64 `json:"x"`
	Y    []float64 `json:"y"`
}

// Plot is one figure; with XLabels the x values are indices into them.
type Plot struct {
	Name    string   `json:"name"` // file stem
	Title   string   `json:"title"`
	XLabel  string   `json:"xLabel"`
	YLabel  string   `json:"yLabel"`
	XLabels []string `json:"xLabels,omitempty"`
	LogX    bool     `json:"logX,omitempty"`
	Series  []Series `json:"series"`
	// Marks are vertical lines at x values of note on over-time plots:
	// a fault's start and end, a flow joining. Drawn dashed, labelled.
	Marks []Mark `json:"marks,omitempty"`
}

// Mark is one vertical line of a plot, in the plot's x units.
type Mark struct {
	X     float64 `json:"x"`
	Label string  `json:"label"`
}

// Section is an extra report section (markdown body), e.g. a preflight.
type Section struct {
	Title string
	Body  string
}

// Results are what a run produced. Columns and Rows are results.csv (and
// results.json, one object per row, and report.html's results table),
// built by Row; Table is the terminal table (also in report.md); every
// value is a function of the config, parameters and seed.
type Results struct {
	Columns []string
	Rows    [][]string
	// table is what Row builds Columns and Rows from (and, for an
	// experiment whose terminal table is its rows, Table: table.Text).
	table  Table
	Table  string
	Checks []Check
	Plots  []Plot
	Notes  string // markdown after the table
	Events uint64 // simulation events executed
	Before []Section
	Files  []File // extra files for the report directory, e.g. a faults event log
	// Failed lists the points that failed, one line each with what failed
	// ("RoCE, 1 QP, loss 1% (QP error: retry limit)"): an error, a stalled
	// job, a QP error or a wrong byte where the experiment set out to
	// measure a completed run. A failure that is the experiment's finding
	// (failover's RoCE cell, whose check asserts that it stalls) is not
	// listed. Points is how many points ran, for "2 of 9 failed".
	Failed []string
	Points int
}

// FailedError is Execute's error for a run that completed with failed
// points (Results.Failed): the report directory is complete and the
// manifest's status says what failed.
type FailedError struct {
	Experiment string
	Failed     []string
	Points     int
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%s: %d of %d points failed: %s", e.Experiment, len(e.Failed), e.Points, strings.Join(e.Failed, "; "))
}

// File is an extra output file of a run, written as is.
type File struct {
	Name string
	Data []byte
}

// Passed reports whether every check the setup can test passed (and
// there was one) and no point failed, and lists the differing checks
// (median and spread against the band).
func (r *Results) Passed() (bool, []string) {
	var bad []string
	testable := 0
	for _, c := range r.Checks {
		if !c.Testable() {
			continue
		}
		testable++
		if !c.Pass {
			bad = append(bad, fmt.Sprintf("%s %q: expected %s (band %s), median %s, spread %s", c.Target, c.Claim, c.Expected, c.Band, c.Band.Format(c.Median), c.spread()))
		}
	}
	return len(bad) == 0 && testable > 0 && len(r.Failed) == 0, bad
}

var registry = map[string]*Experiment{}

// Register adds s to the catalogue (from init). An Experiment without a name or
// Args, or with a parameter key twice, is a programming error: it panics.
func Register(s *Experiment) {
	if err := s.valid(); err != nil {
		panic("experiments: " + err.Error())
	}
	if _, dup := registry[s.Name]; dup {
		panic("experiments: duplicate " + s.Name)
	}
	registry[s.Name] = s
}

// valid checks what Register needs of s.
func (s *Experiment) valid() error {
	if s.Name == "" || s.Args == nil {
		return fmt.Errorf("experiment %q: want a Name and Args", s.Name)
	}
	seen := map[string]bool{}
	for _, p := range s.Params {
		if p.Key == "" || seen[p.Key] {
			return fmt.Errorf("experiment %s: parameter key %q empty or listed twice", s.Name, p.Key)
		}
		seen[p.Key] = true
	}
	return nil
}

// aliases are other names for experiments of the catalogue: the names the
// issue and TARGETS.md use where ours differ.
var aliases = map[string]string{
	"loss-sweep": "allreduce-loss", // TARGETS T2/T3, as issue #7 names it
}

// Lookup finds an experiment by name or alias.
func Lookup(name string) (*Experiment, error) {
	if s, ok := registry[name]; ok {
		return s, nil
	}
	if s, ok := registry[aliases[name]]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("no experiment %q (have: %s)", name, strings.Join(Names(), ", "))
}

// Aliases returns the other names of experiment name, sorted.
func Aliases(name string) []string {
	var a []string
	for k, v := range aliases {
		if v == name {
			a = append(a, k)
		}
	}
	sort.Strings(a)
	return a
}

// Names lists the catalogue, sorted.
func Names() []string {
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// DefaultName is the experiment `vcluster run` runs.
const DefaultName = "allreduce-loss"

// ResolveParams returns e's parameters at size s with overrides
// (key=value, key without the "exp." prefix) applied; unknown keys are errors.
func ResolveParams(e *Experiment, s Size, overrides []string) (map[string]string, error) {
	p := map[string]string{}
	for _, q := range e.Params {
		p[q.Key] = q.Value(s)
	}
	for _, kv := range overrides {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("exp.%s: want key=value", kv)
		}
		if _, known := p[k]; !known {
			var keys []string
			for _, q := range e.Params {
				keys = append(keys, "exp."+q.Key)
			}
			return nil, fmt.Errorf("exp.%s: %s has no such parameter (has: %s)", k, e.Name, strings.Join(keys, ", "))
		}
		p[k] = v
	}
	return p, nil
}

// SplitSets separates experiment parameters (exp.key=value) from cluster
// config overrides in a --set list.
func SplitSets(sets []string) (cluster, params []string) {
	for _, s := range sets {
		if rest, ok := strings.CutPrefix(s, "exp."); ok {
			params = append(params, rest)
		} else {
			cluster = append(cluster, s)
		}
	}
	return cluster, params
}

// mrcSets and roceSets are the config overrides that make a cell run MRC
// (SRv6 uSID, spraying) or RoCE (ECMP) with qps QPs per connection,
// followed by extra.
func mrcSets(qps int, extra ...string) []string {
	return append([]string{"transport.kind=mrc", "fabric.forwarding=usid", "transport.qpsPerConnection=" + strconv.Itoa(qps)}, extra...)
}

func roceSets(qps int, extra ...string) []string {
	return append([]string{"transport.kind=roce", "fabric.forwarding=ecmp", "transport.qpsPerConnection=" + strconv.Itoa(qps)}, extra...)
}

// paperCluster is an experiment's cluster settings: sets after the
// paper's timing (per-switch forwarding latency, NIC latency, physical
// link delays, calibrated from TARGETS T1 and used unchanged by every
// experiment: config.PaperTimingSets). Every experiment's ClusterSets go
// through it.
func paperCluster(sets ...string) []string {
	return append(config.PaperTimingSets(), sets...)
}
