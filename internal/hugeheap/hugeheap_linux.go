//go:build linux

package hugeheap

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

const (
	hugePage = 2 << 20
	// chunk is the unit of the reservation. The runtime zeroes a whole
	// allocation when any of it reuses memory the heap used before (which
	// would touch, and so fault in, all of it); in chunks, only chunks
	// that land on such memory are zeroed.
	chunk = 64 << 20
)

var reserved sync.Once

// Reserve grows the heap by about n bytes advised for huge pages and frees
// them for the allocations that follow. It returns how many bytes were
// advised. It acts once per process (later calls return 0): call it
// first, before building what is large.
//
// n is capped at three quarters of the memory the kernel says is available:
// the reservation is only address space, but a kernel that does not
// overcommit would refuse it, and the Go runtime cannot survive a refused
// heap mapping.
func Reserve(n int) (advised int, err error) {
	n = capReservation(n, meminfo("MemAvailable:"))
	if n < 2*hugePage {
		return 0, nil
	}
	reserved.Do(func() {
		chunks := make([][]byte, 0, n/chunk+1)
		for left := n; left > 0 && err == nil; left -= chunk {
			b := make([]byte, min(left, chunk))
			chunks = append(chunks, b)
			var a int
			a, err = Advise(b)
			advised += a
		}
		runtime.KeepAlive(chunks)
		chunks = nil
		runtime.GC()
	})
	if err != nil {
		return 0, err
	}
	return advised, nil
}

// Advise asks for huge pages for the whole 2 MiB pages inside b and
// returns how many bytes that covers. Pages already touched keep their
// small pages until the kernel collapses them.
func Advise(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + hugePage - 1) &^ (hugePage - 1)
	hi := (p + uintptr(len(b))) &^ (hugePage - 1)
	if hi <= lo {
		return 0, nil
	}
	if err := syscall.Madvise(b[lo-p:hi-p], 14 /* MADV_HUGEPAGE */); err != nil {
		return 0, err
	}
	return int(hi - lo), nil
}

// capReservation limits a reservation of n bytes to three quarters of
// avail bytes (when avail is known, > 0).
func capReservation(n int, avail int64) int {
	if avail > 0 && int64(n) > avail/4*3 {
		return int(avail / 4 * 3)
	}
	return n
}

// Backed reports how many bytes of the process's anonymous memory are
// huge pages now (AnonHugePages of /proc/self/smaps_rollup).
func Backed() int64 { return kBField("/proc/self/smaps_rollup", "AnonHugePages:") }

func meminfo(field string) int64 { return kBField("/proc/meminfo", field) }

// kBField reads a "Name:   123 kB" line of a /proc file, in bytes; 0 if
// it is not there.
func kBField(path, field string) int64 {
	f, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(f))
	for s.Scan() {
		if v, ok := bytes.CutPrefix(s.Bytes(), []byte(field)); ok {
			kb, _ := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return kb << 10
		}
	}
	return 0
}
