//go:build !linux

package fabric

// threadCPU is not measured off Linux: it reports 0.
func threadCPU() (ns func() int64, unlock func()) {
	return func() int64 { return 0 }, func() {}
}
