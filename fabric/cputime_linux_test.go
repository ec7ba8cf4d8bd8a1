package fabric

import (
	"runtime"
	"syscall"
)

// threadCPU returns the CPU time the calling OS thread has used, in ns,
// and a function that undoes the thread lock it takes: benchmarks report
// it beside wall time, which on a shared machine counts other processes'
// turns too.
func threadCPU() (ns func() int64, unlock func()) {
	runtime.LockOSThread()
	return func() int64 {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_THREAD, &ru) != nil {
			return 0
		}
		return ru.Utime.Nano() + ru.Stime.Nano()
	}, runtime.UnlockOSThread
}
