// Package lab is `vcluster lab`: it starts a lab — one fabric process and
// one process per virtual host, children of the vcluster binary itself —
// records it in a state directory, and drives it through the processes'
// HTTP APIs (the shapes of compose/labapi): status, collectives, live
// fault plans, captures, the topology graph, restarting a host, and
// stopping everything it started and nothing else.
//
// How a process is started, watched and stopped is a Runtime: Process
// (children in their own process groups, logs in the state directory) is
// the one there is; a Docker runtime slots in behind the same interface
// without changing the commands. The commands themselves only know the
// state directory (state.json), the runtime and the labapi shapes: never
// the fabric's or a host's code.
//
// State directory layout (default ./vcluster-lab):
//
//	state.json        what runs: every process's name, role, pid, addresses, args, log
//	secret            the lab's tunnel secret (0600)
//	run/              ready files and the config copy the processes read
//	logs/NAME.log     each process's stdout and stderr (kept by lab down)
//
// It may read the wall clock (it is compose/), and imports compose/labspec,
// compose/labapi, compose/tunnel (the lab secret), config, collectives
// (names, the nccl-tests table), sim (a Result's time) and units.
package lab
