//go:build linux

package hugeheap

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

const hugePage = 2 << 20

// Reserve grows the heap by n bytes advised for huge pages and frees them
// for the allocations that follow. It returns how many bytes were advised.
// Call it before building what is large.
func Reserve(n int) (int, error) {
	if n < 2*hugePage {
		return 0, nil
	}
	b := make([]byte, n)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + hugePage - 1) &^ (hugePage - 1)
	hi := (p + uintptr(n)) &^ (hugePage - 1)
	var err error
	if hi > lo {
		err = syscall.Madvise(b[lo-p:hi-p], 14 /* MADV_HUGEPAGE */)
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
	if err != nil {
		return 0, err
	}
	return int(hi - lo), nil
}

// Backed reports how many bytes of the process's anonymous memory are
// huge pages now (AnonHugePages of /proc/self/smaps_rollup).
func Backed() int64 {
	f, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(f))
	for s.Scan() {
		if v, ok := bytes.CutPrefix(s.Bytes(), []byte("AnonHugePages:")); ok {
			kb, _ := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return kb << 10
		}
	}
	return 0
}
