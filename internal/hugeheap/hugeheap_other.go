//go:build !linux

package hugeheap

// Reserve does nothing where there is no madvise.
func Reserve(n int) (int, error) { return 0, nil }

// Backed is 0 where huge pages cannot be read.
func Backed() int64 { return 0 }

// Advise does nothing where there is no madvise.
func Advise(b []byte) (int, error) { return 0, nil }
