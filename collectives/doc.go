// Package collectives runs NCCL-style collectives (all-reduce, all-gather,
// reduce-scatter, all-to-all, broadcast) over a simulated cluster, built
// on the verbs API only: registered buffers, per-peer connections with
// transport.qpsPerConnection QPs, and one-sided WriteImm whose immediate
// tags the message that landed. An Algorithm compiles to a Plan — one
// program of steps (write, wait, reduce, copy) per rank — that the
// runtime executes event-driven on the cluster's loop (on a partitioned
// cluster, each rank on its host's partition loop). Results are real
// float32 sums checked against a direct computation; measurements follow
// nccl-tests (time, algbw, busbw); the timeline exports as Chrome trace
// events. A communicator may also run only some of its ranks, the others
// living in other processes (Options.Local, remote.go): lab hosts drive it
// one iteration at a time (Prepare, Start, Result). See
// docs/collectives.md.
//
// Nothing here reads the wall clock or sleeps: same config and seed, same
// results.
package collectives
