package collectives

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// SizesBy is nccl-tests' -b/-e/-f: min, then ×factor while ≤ max.
func TestSizesBy(t *testing.T) {
	const K, M, G, T = 1 << 10, 1 << 20, 1 << 30, 1 << 40
	for _, tc := range []struct {
		min, max, f uint64
		want        []uint64
	}{
		{M, G, 4, []uint64{M, 4 * M, 16 * M, 64 * M, 256 * M, G}},
		{M, 64 * M, 2, []uint64{M, 2 * M, 4 * M, 8 * M, 16 * M, 32 * M, 64 * M}},
		{M, 63 * M, 2, []uint64{M, 2 * M, 4 * M, 8 * M, 16 * M, 32 * M}},
		{3, 100, 10, []uint64{3, 30}},
		{1, T, 1024, []uint64{1, K, M, G, T}},
		{5, 5, 3, []uint64{5}},
		{1 << 63, ^uint64(0), 3, []uint64{1 << 63}}, // 3·2^63 would wrap: the end
		{1 << 61, ^uint64(0), 3, []uint64{1 << 61, 3 << 61}},
	} {
		if got := SizesBy(tc.min, tc.max, tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SizesBy(%d, %d, %d) = %v, want %v", tc.min, tc.max, tc.f, got, tc.want)
		}
	}
	if got, want := Sizes(K, 8*K), SizesBy(K, 8*K, 2); !reflect.DeepEqual(got, want) {
		t.Errorf("Sizes = %v, SizesBy(…, 2) = %v", got, want)
	}
}

func TestParseSizeRange(t *testing.T) {
	for s, want := range map[string]SizeRange{
		"1M:1G:4":    {1 << 20, 1 << 30, 4},
		"1M:1G":      {1 << 20, 1 << 30, 2},
		"64K":        {64 << 10, 64 << 10, 2},
		"1:1T:1024":  {1, 1 << 40, 1024},
		"8:8:2":      {8, 8, 2},
		" 1K : 4K:3": {1 << 10, 4 << 10, 3},
	} {
		if got, err := ParseSizeRange(s); err != nil || got != want {
			t.Errorf("ParseSizeRange(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	// Each refusal names the part and the reason.
	for s, want := range map[string]string{
		"1M:1G:1":                    "factor 1 is below 2",
		"1M:1G:0":                    "factor 0 is below 2",
		"1M:1G:1.5":                  `factor "1.5" is not an integer`,
		"1M:1G:-2":                   `factor "-2" is not an integer`,
		"1M:1G:":                     `factor "" is not an integer`,
		"1M:1G:1025":                 "factor 1025 is above 1024",
		"1M:1G:99999999999999999999": "factor 99999999999999999999 is above 1024",
		"1G:1M":                      "max 1M is below min 1G",
		"1G:1M:4":                    "max 1M is below min 1G",
		"0:1M":                       "min is 0",
		"1M:1X":                      `max: bad size "1X"`,
		"x:1M":                       `min: bad size "x"`,
		"1M:1G:2:2":                  "4 parts",
	} {
		_, err := ParseSizeRange(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSizeRange(%q) = %v, want an error with %q", s, err, want)
		}
	}
}

// The footer's bandwidth is C's %g of the mean (6 significant digits),
// and every cell is nccl-tests' getFloatStr: 2 decimals if they fit the
// column, else 1, else 0, else e notation.
func TestWriteTableNumbers(t *testing.T) {
	for _, tc := range []struct {
		busbw []float64
		avg   string
	}{
		{[]float64{10, 20}, "15"},
		{[]float64{12.3456789, 0.0000123}, "6.17285"}, // 6.172845… rounds up
		{[]float64{1, 2, 4}, "2.33333"},
		{[]float64{123456.7}, "123457"},
		{[]float64{1234567}, "1.23457e+06"},
		{[]float64{0.00001}, "1e-05"},
		{[]float64{0.0001}, "0.0001"},
		{[]float64{0}, "0"},
	} {
		var rs []Result
		for _, b := range tc.busbw {
			rs = append(rs, Result{Op: AllReduce, Bytes: 1024, Count: 256, Root: -1, BusBW: b, Wrong: -1, Check: CheckOff})
		}
		var out bytes.Buffer
		WriteTable(&out, rs)
		want := "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : " + tc.avg + " \n#\n"
		if !strings.HasSuffix(out.String(), want) {
			t.Errorf("busbw %v: footer\n%q\nwant\n%q", tc.busbw, out.String()[strings.LastIndex(out.String(), "# Out"):], want)
		}
	}

	for _, tc := range []struct {
		v     float64
		width int
		want  string
	}{
		{0.5, 7, "   0.50"},
		{1234.5678, 7, "1234.57"},
		{12345.678, 7, "12345.7"},
		{123456.78, 7, " 123457"},
		{12345678.9, 7, "1.2e+07"},
		{1234.567, 6, "1234.6"},
		{12345.6, 6, " 12346"},
		{1234567, 6, " 1e+06"},
		{0, 6, "  0.00"},
	} {
		if got := ncclFloat(tc.v, tc.width); got != tc.want {
			t.Errorf("ncclFloat(%v, %d) = %q, want %q", tc.v, tc.width, got, tc.want)
		}
	}
}

// The table's layout is nccl-tests': its header lines, its column widths,
// N/A when not checked, and a failed row counted in the footer.
func TestWriteTableLayout(t *testing.T) {
	rs := []Result{
		{Op: AllReduce, Bytes: 1 << 20, Count: 1 << 18, Root: -1, TimeNs: 52_340, AlgBW: 20.03, BusBW: 35.05, Wrong: 0, Check: CheckOK},
		{Op: AllGather, Bytes: 2 << 20, Count: 1 << 16, Root: -1, TimeNs: 1_234_567_890, AlgBW: 0.0017, BusBW: 0.0015, Wrong: 12, Check: CheckFailed},
		{Op: Broadcast, Bytes: 4 << 20, Count: 1 << 20, Root: 3, TimeNs: 1000, AlgBW: 4194.3, BusBW: 4194.3, Wrong: -1, Check: CheckSkipped},
	}
	var out bytes.Buffer
	WriteTable(&out, rs)
	want := "#\n" + InPlaceNote + "\n" +
		"#                                                              out-of-place\n" +
		"#       size         count      type   redop    root     time   algbw   busbw  #wrong  check\n" +
		"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        \n" +
		"     1048576        262144     float     sum      -1    52.34   20.03   35.05       0  ok\n" +
		"     2097152         65536     float    none      -1  1234568    0.00    0.00      12  FAILED\n" +
		"     4194304       1048576     float    none       3     1.00  4194.3  4194.3     N/A  " + CheckSkipped + "\n" +
		"# Out of bounds values : 1 FAILED\n" +
		"# Avg bus bandwidth    : 1409.78 \n#\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A deadline the collective cannot meet stops it there with a
// DeadlineError naming the unfinished ranks; one it meets changes nothing
// (the same rows as without it), on the classic loop and on a partitioned
// cluster alike.
func TestRunDeadline(t *testing.T) {
	for _, parts := range []int{0, 4} {
		run := func(deadline sim.Time) ([]Result, error, *Comm) {
			c := newPartCluster(t, "mrc", 16, parts, 2, "transport.payload=elided")
			m := newComm(t, c, Options{Hosts: firstHosts(8)})
			var seen []uint64
			rs, err := m.Sweep(mustLookup(t, "allreduce/ring"), Sizes(256<<10, 4<<20), RunOptions{Iters: 2, Warmup: 1, Deadline: deadline,
				Before: func(i, n int, size uint64) {
					if n != 5 || i != len(seen) {
						t.Errorf("parts %d: Before(%d, %d, %d) after %d sizes, want i of 5", parts, i, n, size, len(seen))
					}
					seen = append(seen, size)
				}})
			if want := m.SweepSizes(Sizes(256<<10, 4<<20)); err == nil && !reflect.DeepEqual(seen, want) {
				t.Errorf("parts %d: Before saw %v, want %v", parts, seen, want)
			}
			return rs, err, m
		}
		ref, err, m := run(0)
		if err != nil || len(ref) != 5 {
			t.Fatalf("parts %d: %d rows, %v", parts, len(ref), err)
		}
		end := m.C.Now()
		if got, err, _ := run(end + sim.Millisecond); err != nil || !reflect.DeepEqual(got, ref) {
			t.Errorf("parts %d: a deadline after the end changed the rows (%v):\n%+v\nwant\n%+v", parts, err, got, ref)
		}
		// Halfway through the fourth size's timed iterations.
		cut := ref[3].Start + ref[3].TimeNs/2
		got, err, m := run(cut)
		var de *DeadlineError
		if !errors.As(err, &de) {
			t.Fatalf("parts %d: deadline %v: err %v, want a DeadlineError", parts, cut, err)
		}
		t.Logf("parts %d: %v", parts, err)
		if !reflect.DeepEqual(got, ref[:3]) {
			t.Errorf("parts %d: rows before the deadline differ:\n%+v\nwant\n%+v", parts, got, ref[:3])
		}
		if de.Deadline != cut || de.Iteration != 2 || de.Iters != 3 || de.Warmup || de.Ranks != 8 || de.Unfinished < 1 || len(de.Where) != min(de.Unfinished, 4) {
			t.Errorf("parts %d: %+v, want iteration 2 of 3, 8 ranks, where for up to 4 unfinished", parts, de)
		}
		if !regexp.MustCompile(`^allreduce/ring 2097152 bytes: not finished by the deadline \(virtual time [0-9.]+ ms\), iteration 2 of 3: \d of 8 ranks unfinished: rank \d at step \d+ of \d+ `).MatchString(err.Error()) {
			t.Errorf("parts %d: message %q", parts, err)
		}
		// The cluster stopped at the deadline (a partitioned one at the
		// window boundary then), not at the end of the collective.
		if now := m.C.Now(); now < cut || now > cut+2*sim.Microsecond {
			t.Errorf("parts %d: stopped at %v, deadline %v", parts, now, cut)
		}
	}
}
