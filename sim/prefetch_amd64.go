package sim

import "unsafe"

// PrefetchLine asks the CPU to bring the cache line holding p into the
// caches without waiting for it (PREFETCHT0): unlike a load, it never
// stalls the pipeline, and an invalid address is ignored.
//
//go:noescape
func PrefetchLine(p unsafe.Pointer)
