// Package experiments holds vcluster's named, reproducible experiments:
// config → run → results, report. For now it holds the comparison that
// `vcluster run` prints; the catalogue of experiments that reproduce the
// published results (TARGETS.md) arrives with the experiments issue.
//
// It never looks at packet formats: it drives clusters through package
// cluster and reads transport and fabric counters.
package experiments
