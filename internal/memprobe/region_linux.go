//go:build linux

package memprobe

import (
	"syscall"
	"unsafe"

	"github.com/vcluster/vcluster/internal/hugeheap"
)

// Map maps a fresh anonymous region of n bytes (rounded up to 2 MiB),
// advised for transparent huge pages when huge is set, outside the Go heap
// so that the probe's pages are its own. free unmaps it.
func Map(n int, huge bool) (region []uint64, free func(), err error) {
	const hp = 2 << 20
	n = (n + hp - 1) &^ (hp - 1)
	b, err := syscall.Mmap(-1, 0, n+hp, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	off := (hp - int(uintptr(unsafe.Pointer(&b[0])))%hp) % hp
	r := b[off : off+n]
	if huge { // the same advice the heap gets (hugeheap)
		if _, err := hugeheap.Advise(r); err != nil {
			syscall.Munmap(b)
			return nil, nil, err
		}
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&r[0])), n/8), func() { syscall.Munmap(b) }, nil
}
