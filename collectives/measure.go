package collectives

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/vcluster/vcluster/sim"
)

// Check states of a result.
const (
	CheckOK      = "ok"
	CheckFailed  = "FAILED"
	CheckOff     = "off"
	CheckSkipped = "skipped (payload elided: no bytes to check)"
)

// Result is one row of the nccl-tests table.
type Result struct {
	Op    Op     `json:"op"`
	Algo  string `json:"algo"`
	Ranks int    `json:"ranks"`
	Bytes uint64 `json:"bytes"` // the nccl-tests size
	Count uint64 `json:"count"` // float32 elements (per rank for all-gather and reduce-scatter, as nccl-tests)
	Root  int    `json:"root"`  // broadcast; -1 otherwise
	Iters int    `json:"iters"`
	// TimeNs is the mean virtual time of one iteration, from the launch to
	// the moment the last rank finished (program done, writes completed).
	TimeNs sim.Time `json:"time_ns"`
	AlgBW  float64  `json:"algbw_GBps"` // Bytes / time, GB/s (10^9)
	BusBW  float64  `json:"busbw_GBps"` // AlgBW × the bus factor
	Check  string   `json:"check"`
	Wrong  int64    `json:"wrong"` // wrong elements over all ranks; -1 when not checked
	Start  sim.Time `json:"start_ns"`
}

// RunOptions select what Run does besides timing.
type RunOptions struct {
	Iters  int // timed iterations (default 1)
	Warmup int // untimed iterations before them
	Root   int // broadcast root
}

// Run executes algorithm a on every rank for size bytes (rounded with
// RoundSize), Warmup + Iters times back to back (each iteration starts when
// the previous one finished on every rank; on a partitioned cluster at the
// window boundary after that, see Comm), and checks the last result unless
// checking is off or the payload elided.
func (m *Comm) Run(a *Algorithm, size uint64, o RunOptions) (Result, error) {
	return m.runOn(a, m.groups(m.Size()), size, o)
}

// runOn runs a on each group of comm ranks at once (disjoint groups, each
// its own instance of the collective; plan rank i of a group is comm rank
// group[i]). Times are from the launch to the last rank of any group.
func (m *Comm) runOn(a *Algorithm, groups [][]int, size uint64, o RunOptions) (Result, error) {
	n := len(groups[0])
	o.Iters = max(o.Iters, 1)
	if o.Root < 0 || o.Root >= n {
		return Result{}, fmt.Errorf("collectives: root %d outside 0..%d", o.Root, n-1)
	}
	size = RoundSize(n, size)
	p := Params{N: n, Bytes: size, Root: o.Root, Chunk: m.opt.Chunk, Channels: m.channels}
	plan, err := a.Build(p)
	if err != nil {
		return Result{}, fmt.Errorf("%s/%s: %w", a.Op, a.Name, err)
	}
	send, recv := Buffers(a.Op, n, size)
	seed := m.C.Config.Seed ^ size
	m.C.Sync() // connections made below see the same time on every host
	for _, g := range groups {
		if len(g) != n {
			return Result{}, fmt.Errorf("collectives: groups of different sizes")
		}
		if err := m.prepare(plan, g, send, recv); err != nil {
			return Result{}, err
		}
		if m.real && !m.opt.NoCheck {
			for pr, cr := range g {
				fill(m.ranks[cr].bufs[Send].Buf[:send], seed, pr)
			}
		}
	}
	res := Result{Op: a.Op, Algo: a.Name, Ranks: n, Bytes: size, Count: send / 4, Root: -1, Iters: o.Iters}
	switch a.Op {
	case AllGather:
		res.Count = send / 4
	case ReduceScatter:
		res.Count = recv / 4
	case Broadcast:
		res.Root = o.Root
	}
	label := fmt.Sprintf("%s %s %s", a.Op, a.Name, FormatBytes(size))
	var total sim.Time
	for it := 0; it < o.Warmup+o.Iters; it++ {
		t0 := m.now()
		if it == o.Warmup {
			res.Start = t0
		}
		for _, g := range groups {
			m.launch(plan, g, label, t0)
		}
		if err := m.wait(); err != nil {
			return res, fmt.Errorf("%s/%s %d bytes: %w", a.Op, a.Name, size, err)
		}
		if it >= o.Warmup {
			total += m.end - t0
		}
	}
	res.TimeNs = total / sim.Time(o.Iters)
	if res.TimeNs > 0 {
		res.AlgBW = float64(size) / float64(res.TimeNs) // bytes/ns = GB/s
		res.BusBW = res.AlgBW * BusFactor(a.Op, n)
	}
	res.Wrong = -1
	switch {
	case m.opt.NoCheck:
		res.Check = CheckOff
	case !m.real:
		res.Check = CheckSkipped
	default:
		ref := newReference(a.Op, seed, n, o.Root, send, recv)
		res.Wrong = 0
		for _, g := range groups {
			for pr, cr := range g {
				res.Wrong += ref.countWrong(pr, m.ranks[cr].bufs[Recv].Buf[:recv])
			}
		}
		res.Check = CheckOK
		if res.Wrong > 0 {
			res.Check = CheckFailed
		}
	}
	return res, nil
}

// Sweep runs a at every size and returns the rows (sizes that round to
// the same as the previous one are run once).
func (m *Comm) Sweep(a *Algorithm, sizes []uint64, o RunOptions) ([]Result, error) {
	var rs []Result
	var last uint64
	for _, s := range sizes {
		if RoundSize(m.Size(), s) == last {
			continue
		}
		last = RoundSize(m.Size(), s)
		r, err := m.Run(a, s, o)
		if err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// Sizes returns min, 2·min, 4·min, … up to max (nccl-tests -b/-e/-f 2).
func Sizes(minB, maxB uint64) []uint64 {
	var s []uint64
	for b := max(minB, 1); b <= maxB; b *= 2 {
		s = append(s, b)
		if b > maxB/2 { // the next doubling is past maxB (or would wrap)
			break
		}
	}
	return s
}

// ParseSize reads a size: digits with an optional binary unit K, M, G or
// T (or KiB … TiB, or a trailing B): 1M = 1048576. 0 is a size; more than
// 2^64 bytes is not.
func ParseSize(s string) (uint64, error) {
	if v, ok := parseSize(s, "KMGT"); ok {
		return v, nil
	}
	return 0, fmt.Errorf("bad size %q (want e.g. 4096, 64K, 1M, 1G, 1T)", s)
}

// ParseBytes reads a message size as ParseSize does, with units up to G,
// and refuses 0.
func ParseBytes(s string) (uint64, error) {
	if v, ok := parseSize(s, "KMG"); ok && v > 0 {
		return v, nil
	}
	return 0, fmt.Errorf("bad size %q (want e.g. 4096, 64K, 1M, 1G)", s)
}

// parseSize reads digits with an optional unit from units (K = 2^10, M =
// 2^20, … in that order), refusing a value past 2^64.
func parseSize(s, units string) (uint64, bool) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	shift := uint(0)
	if t != "" {
		if i := strings.IndexByte(units, t[len(t)-1]); i >= 0 {
			shift = 10 * uint(i+1)
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v > math.MaxUint64>>shift {
		return 0, false
	}
	return v << shift, true
}

// ParseSizeRange reads "min:max" (or one size) into the doubling list.
func ParseSizeRange(s string) ([]uint64, error) {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		hi = lo
	}
	a, err := ParseBytes(lo)
	if err != nil {
		return nil, err
	}
	b, err := ParseBytes(hi)
	if err != nil {
		return nil, err
	}
	if b < a {
		return nil, fmt.Errorf("size range %q: max below min", s)
	}
	return Sizes(a, b), nil
}

// FormatBytes prints a size with a binary unit when exact (1M, 256K).
func FormatBytes(b uint64) string {
	for _, u := range []struct {
		s string
		v uint64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b >= u.v && b%u.v == 0 {
			return fmt.Sprintf("%d%s", b/u.v, u.s)
		}
	}
	return fmt.Sprintf("%dB", b)
}

// WriteTable prints rows as nccl-tests does (times in µs of virtual time).
func WriteTable(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "#\n# %10s %12s %8s %6s %6s %12s %8s %8s %8s  %s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "check")
	fmt.Fprintf(w, "# %10s %12s %8s %6s %6s %12s %8s %8s %8s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "")
	var sum float64
	for _, r := range rs {
		redop := "sum"
		if r.Op == AllGather || r.Op == AllToAll || r.Op == Broadcast {
			redop = "none"
		}
		wrong := "N/A"
		if r.Wrong >= 0 {
			wrong = strconv.FormatInt(r.Wrong, 10)
		}
		fmt.Fprintf(w, "  %10d %12d %8s %6s %6d %12.2f %8.2f %8.2f %8s  %s\n", r.Bytes, r.Count, "float", redop, r.Root,
			float64(r.TimeNs)/1e3, r.AlgBW, r.BusBW, wrong, r.Check)
		sum += r.BusBW
	}
	if len(rs) > 0 {
		fmt.Fprintf(w, "# Avg bus bandwidth    : %g\n#\n", sum/float64(len(rs)))
	}
}

// WriteCSV writes rows as CSV with a header line.
func WriteCSV(w io.Writer, rs []Result) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"op", "algo", "ranks", "bytes", "count", "root", "iters", "time_us", "algbw_GBps", "busbw_GBps", "wrong", "check"})
	for _, r := range rs {
		cw.Write([]string{string(r.Op), r.Algo, strconv.Itoa(r.Ranks), strconv.FormatUint(r.Bytes, 10), strconv.FormatUint(r.Count, 10),
			strconv.Itoa(r.Root), strconv.Itoa(r.Iters), strconv.FormatFloat(float64(r.TimeNs)/1e3, 'f', 3, 64),
			strconv.FormatFloat(r.AlgBW, 'f', 3, 64), strconv.FormatFloat(r.BusBW, 'f', 3, 64), strconv.FormatInt(r.Wrong, 10), r.Check})
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes rows as an indented JSON array.
func WriteJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}
