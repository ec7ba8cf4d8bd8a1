//go:build linux

package hugeheap

import (
	"os"
	"strings"
	"testing"
)

// The pages Reserve advised must be the ones later allocations get: a slab
// allocated after it and written ends up (mostly) in huge pages.
func TestReserveBacksLaterAllocations(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Skipf("no transparent huge pages here: %v", err)
	}
	if !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skipf("transparent huge pages are %q: the kernel never backs advised memory with them", strings.TrimSpace(string(mode)))
	}
	before := Backed()
	n, err := Reserve(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if n < 200<<20 {
		t.Fatalf("advised %d bytes of a 256 MiB reservation", n)
	}
	if again, err := Reserve(256 << 20); again != 0 || err != nil {
		t.Fatalf("a second Reserve = %d, %v; want 0, nil (once per process)", again, err)
	}
	slab := make([]int64, 128<<20/8)
	for i := 0; i < len(slab); i += 512 {
		slab[i] = int64(i)
	}
	got := Backed() - before
	if got < 64<<20 {
		t.Fatalf("after writing a 128 MiB slab allocated from the reservation, %d MiB more are in huge pages, want ≥ 64", got>>20)
	}
	t.Logf("%d MiB advised, %d MiB more in huge pages", n>>20, got>>20)
	_ = slab[len(slab)-1]
}

// A reservation beyond the machine's memory is cut to what is available
// instead of failing the process.
func TestCapReservation(t *testing.T) {
	for _, c := range []struct {
		n     int
		avail int64
		want  int
	}{{16 << 30, 8 << 30, 6 << 30}, {1 << 30, 8 << 30, 1 << 30}, {16 << 30, 0, 16 << 30}} {
		if got := capReservation(c.n, c.avail); got != c.want {
			t.Errorf("capReservation(%d, %d) = %d, want %d", c.n, c.avail, got, c.want)
		}
	}
}

func TestReserveSmallIsNoop(t *testing.T) {
	if n, err := Reserve(1 << 20); n != 0 || err != nil {
		t.Fatalf("Reserve(1 MiB) = %d, %v; want 0, nil", n, err)
	}
}
