//go:build !amd64

package sim

import "unsafe"

// PrefetchLine is a no-op where vcluster has no prefetch instruction.
func PrefetchLine(p unsafe.Pointer) {}
