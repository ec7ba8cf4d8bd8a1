package collectives

import (
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/units"
)

// The size, range, operation and workload parsers read command-line flags
// (collective --sizes/--op/--workload): they must never panic, and what
// they accept must be exactly what was written and print back to itself.

var sizeSeeds = []string{"4096", "64K", "1M", "1G", "1MiB", "512KB", "256k", "1B", "0", "-1M", "1T", " 8M ", "1.5M",
	"17179869184G", "18446744073709551615", "18446744073709551616", "1KI", "G", ""}

// digitsTimesUnit is the value a size written as decimal digits and a K, M
// or G unit stands for, computed without overflow; ok is false when s does
// not start with digits.
func digitsTimesUnit(s string) (*big.Int, bool) {
	t := strings.ToUpper(strings.TrimSpace(s))
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	v, ok := new(big.Int).SetString(t[:i], 10)
	if !ok {
		return nil, false
	}
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30}
	if i < len(t) {
		v.Lsh(v, shift[t[i]])
	}
	return v, true
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range sizeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := units.ParseBytes(s)
		if err != nil {
			return
		}
		want, ok := digitsTimesUnit(s)
		if b == 0 {
			t.Fatalf("units.ParseBytes(%q) accepted 0", s)
		}
		if !ok || want.Uint64() != b {
			t.Fatalf("units.ParseBytes(%q) = %d, but it says %v (overflow must be an error)", s, b, want)
		}
		if back, err := units.ParseBytes(units.FormatBytes(b)); err != nil || back != b {
			t.Fatalf("units.ParseBytes(%q) = %d, FormatBytes gives %q, which parses to %d, %v", s, b, units.FormatBytes(b), back, err)
		}
	})
}

func FuzzParseSizeRange(f *testing.F) {
	for _, s := range []string{"1M:1G", "64K", "1:1", "1K:1M", "2:3", "1G:1M", "1M:", ":1M", "1M:1G:2G", "4096:8192",
		"1M:1G:4", "1:1T:1024", "1M:1G:1", "1M:1G:0", "1M:1G:1.5", "1M:1G:1025", "1M:1G:2:2", "0:1M", "3:18446744073709551615:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseSizeRange(s)
		if err != nil {
			if !strings.Contains(err.Error(), "size range") {
				t.Fatalf("ParseSizeRange(%q): error %q does not say what it read", s, err)
			}
			return
		}
		parts := strings.Split(s, ":")
		a, _ := units.ParseSize(parts[0])
		b := a
		if len(parts) > 1 {
			b, _ = units.ParseSize(parts[1])
		}
		if r.Min != a || r.Max != b || a == 0 || b < a || r.Factor < 2 || r.Factor > MaxSizeFactor {
			t.Fatalf("ParseSizeRange(%q) = %+v: not the min %d, max %d written, or a factor out of [2, %d]", s, r, a, b, MaxSizeFactor)
		}
		if len(parts) < 3 && r.Factor != 2 {
			t.Fatalf("ParseSizeRange(%q) = %+v: factor without one written, want 2", s, r)
		}
		sizes := r.Sizes()
		if len(sizes) == 0 || sizes[0] != a {
			t.Fatalf("ParseSizeRange(%q).Sizes() = %v, want it to start at %d", s, sizes, a)
		}
		for i := 1; i < len(sizes); i++ {
			if sizes[i] != r.Factor*sizes[i-1] {
				t.Fatalf("ParseSizeRange(%q).Sizes() = %v: not ×%d at %d", s, sizes, r.Factor, i)
			}
		}
		if last := sizes[len(sizes)-1]; last > b || last <= b/r.Factor {
			t.Fatalf("ParseSizeRange(%q).Sizes() = %v: last %d, max %d: one more step would fit", s, sizes, last, b)
		}
	})
}

func FuzzParseOp(f *testing.F) {
	for _, o := range Ops {
		f.Add(string(o))
	}
	for _, s := range []string{"all_reduce", "All-Gather", "reduce_scatter", "ALLTOALL", "bcast", "", "allreduce "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		op, err := ParseOp(s)
		if err != nil {
			return
		}
		found := false
		for _, o := range Ops {
			found = found || o == op
		}
		if back, err := ParseOp(string(op)); !found || err != nil || back != op {
			t.Fatalf("ParseOp(%q) = %q, not an Op that parses back to itself (%q, %v)", s, op, back, err)
		}
	})
}

func FuzzParseWorkload(f *testing.F) {
	var all []string
	for _, a := range Algorithms("") {
		item := string(a.Op) + ":" + a.Name + ":1M"
		f.Add(item)
		f.Add(item + "@4")
		all = append(all, item)
	}
	f.Add(strings.Join(all, ","))
	for _, s := range []string{"allreduce:ring:64M,alltoall:pairwise:16M@8", "allreduce:ring", "allreduce:nosuch:1M", "allreduce:ring:1M@1",
		"allreduce:ring:1M@x", ",", "", "all_reduce:ring: 1M , alltoall:direct:512K@+2", "allreduce:ring:17179869184G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ParseWorkload(s)
		if err != nil {
			return
		}
		var back []string
		for _, w := range items {
			if w.Bytes == 0 { // ParseBytes refuses a written 0: this wrapped
				t.Fatalf("ParseWorkload(%q) accepted a 0-byte item (overflow?)", s)
			}
			if _, err := Lookup(w.Op, w.Algo); err != nil || (w.Group != 0 && w.Group < 2) {
				t.Fatalf("ParseWorkload(%q) accepted item %+v: %v", s, w, err)
			}
			back = append(back, w.String())
		}
		again, err := ParseWorkload(strings.Join(back, ","))
		if err != nil || !reflect.DeepEqual(again, items) {
			t.Fatalf("ParseWorkload(%q) = %v, printed %q, which parses to %v, %v", s, items, strings.Join(back, ","), again, err)
		}
	})
}

// Found by FuzzParseBytes / FuzzParseSizeRange (issue #14): a size past
// 2^64 wrapped (to 0 for "17179869184G") and was accepted, and a range whose
// max is ≥ 2^63 doubled past it to 0 and never ended.
func TestParseBytesOverflowRefused(t *testing.T) {
	for _, s := range []string{"17179869184G", "18446744073709551616", "16777216T", "18014398509481984K"} {
		if b, err := units.ParseBytes(s); err == nil {
			t.Errorf("units.ParseBytes(%q) = %d, want an error", s, b)
		}
	}
	if b, err := units.ParseBytes("17179869183G"); err != nil || b != 17179869183<<30 {
		t.Errorf("units.ParseBytes(17179869183G) = %d, %v", b, err)
	}
}

func TestSizesEndNearMax(t *testing.T) {
	s := Sizes(1<<62, 1<<63+5)
	if len(s) != 2 || s[0] != 1<<62 || s[1] != 1<<63 {
		t.Fatalf("Sizes(2^62, 2^63+5) = %v", s)
	}
	if s := Sizes(3, ^uint64(0)); len(s) != 63 {
		t.Fatalf("Sizes(3, max) has %d sizes, want 63", len(s))
	}
}
