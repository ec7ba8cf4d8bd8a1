// Package experiments holds vcluster's named, reproducible experiments.
// Each one is data, an Experiment: the TARGETS.md rows it reproduces, its
// cluster settings, its parameters (quick / default / full sizes, each
// overridable with --set exp.<key>=value, read and checked in one place:
// Typed.Read) and its run on the deterministic event loop, which returns
// Results: rows built once (Results.Row: results.csv/json, the HTML and
// terminal tables), plots and a check table (pass / differs, the
// published and measured numbers side by side). Execute runs one and writes the report directory (WriteReport,
// RenderPlot, WriteManifest). The catalogue: allreduce-loss (T2/T3, what
// `vcluster run` runs) and p2p (T1); see docs/experiments.md.
//
// It never looks at packet formats: it drives clusters through packages
// cluster and collectives and reads their measurements. The only wall
// clock it reads is package wallclock's, for the manifest's wall time.
package experiments
