// Package labcni is the CNI plugin vcluster-cni (cmd/vcluster-cni): it
// attaches a container's network namespace to a running lab fabric as
// one of its hosts — a `vcluster host` process whose TUN device lives in
// that namespace — and detaches it, per the CNI specification 1.1 (ADD,
// DEL, CHECK, STATUS, GC, VERSION). docs/lab-cni.md is its manual.
//
// It owns the network config (config.go), the attachment records, ready
// files and host logs in its state directory (state.go), the host
// processes' lives (host.go) and the TUN's name and inspection inside
// the namespace (netns.go).
//
// It must not know the fabric's or a host's code: it starts the vcluster
// binary and talks to it through its flags, ready file and HTTP API
// (compose/labapi), as `vcluster lab` does.
package labcni
