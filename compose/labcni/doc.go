// Package labcni is the CNI plugin vcluster-cni (cmd/vcluster-cni): it
// attaches a container's network namespace to a running lab fabric as
// one of its hosts — a `vcluster host` process whose TUN device lives in
// that namespace — and detaches it, per the CNI specification 1.1 (ADD,
// DEL, CHECK, STATUS, GC, VERSION).
//
// It must not know the fabric's or a host's code: it starts the vcluster
// binary and talks to it through its flags, ready file and HTTP API
// (compose/labapi), as `vcluster lab` does.
package labcni
