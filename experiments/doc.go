// Package experiments holds vcluster's named, reproducible experiments.
// Each one (Experiment) states the TARGETS.md rows it reproduces, its
// cluster settings and parameters (quick / default / full sizes, each
// overridable with --set exp.<key>=value), runs on the deterministic event
// loop, and returns Results: rows (results.csv/json), a table, plots and a
// check table (pass / differs, the published and measured numbers side by
// side). Execute runs one and writes the report directory (WriteReport,
// RenderPlot, WriteManifest). The catalogue: allreduce-loss (T2/T3, what
// `vcluster run` runs) and p2p (T1); see docs/experiments.md.
//
// It never looks at packet formats: it drives clusters through packages
// cluster and collectives and reads their measurements. The only wall
// clock it reads is package wallclock's, for the manifest's wall time.
package experiments
