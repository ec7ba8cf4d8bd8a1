// Package labdocker is what a lab needs from Docker: the lab's compose
// file (spec.go: the services, network, secrets, healthchecks and labels
// a lab is made of, for `docker compose up` and `docker stack deploy`
// alike, checked by loading it back with compose-spec/compose-go, and
// CheckSwarm's rules for a stack deploy: docs/lab-swarm.md), the
// monitoring services' files (Prometheus scrape config, Grafana
// provisioning and dashboard), and the Docker Engine API (engine.go:
// building the lab's image FROM scratch, finding a lab's containers,
// networks and volumes by label, exec, start, stop, remove).
//
// It must not know the lab's state directory, its processes' APIs or
// the simulator: compose/lab drives it. It may read the wall clock and
// shell out to the compose tool (docker compose, or docker-compose where
// the plugin is absent) to start a project; never to build an image.
package labdocker
