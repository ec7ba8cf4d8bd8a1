// Package lab is `vcluster lab`: it starts a lab — one fabric (or one per
// plane) and one process per virtual host, children of the vcluster
// binary or containers of a docker-compose project — records it in a
// state directory, and drives it through the processes'
// HTTP APIs (the shapes of compose/labapi): status, collectives, live
// fault plans, captures, the topology graph, restarting a host, and
// stopping everything it started and nothing else.
//
// How a process is started, watched and stopped is a Runtime: Process
// (children in their own process groups, logs in the state directory) or
// Docker (containers of a generated compose project from an image built
// FROM scratch, found by the vcluster.lab label; compose/labdocker does
// the files and the Engine API). Up and Down branch on the runtime; the
// other commands only ask it whether a process is alive and where. The
// commands themselves only know the state directory (state.json), the
// runtime and the labapi shapes: never the fabric's or a host's code.
//
// State directory layout (default ./vcluster-lab, ./vcluster-lab-NAME):
//
//	state.json          what runs: every process's name, role, pid, addresses, args, log (container)
//	secret              the lab's tunnel secret (0600)
//	run/                ready files and the config copy the processes read
//	logs/NAME.log       each process's stdout and stderr (kept by lab down)
//	docker-compose.yml  a docker lab's compose project, monitoring/ its Prometheus and Grafana files
//
// It may read the wall clock (it is compose/), and imports compose/labspec,
// compose/labapi, compose/labdocker, compose/tunnel (the lab secret),
// config, collectives (names, the nccl-tests table), sim (a Result's time)
// and units.
package lab
