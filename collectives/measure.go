package collectives

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
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
	// Deadline, when not 0, is the virtual time (of the cluster's clock)
	// by which every iteration must have finished: one still running
	// then is stopped and Run returns a *DeadlineError saying which ranks
	// had not finished and where each was. Sweep applies it to the
	// whole sweep: it is a time, not a duration per size.
	Deadline sim.Time
	// Before, when set, is called by Sweep before it runs each size: the
	// i-th (from 0) of the n sizes left after rounding, rounded.
	Before func(i, n int, size uint64)
}

// DeadlineError is a collective that had not finished by
// RunOptions.Deadline.
type DeadlineError struct {
	Deadline  sim.Time
	Iteration int  // from 1, warmup iterations included
	Iters     int  // warmup + timed
	Warmup    bool // the iteration was a warmup one
	// Unfinished of Ranks ranks had not finished their program (or
	// not started: the deadline had passed before the iteration).
	Unfinished, Ranks int
	NotStarted        bool
	// Where says, for the first few unfinished ranks, the step each was
	// at ("rank 3 at step 17 of 40 (wait for rank 2 tag 5 since
	// 1.234 ms), 2 write(s) in flight").
	Where []string
}

func (e *DeadlineError) Error() string {
	kind := "iteration"
	if e.Warmup {
		kind = "warmup iteration"
	}
	at := fmt.Sprintf("%s %d of %d", kind, e.Iteration, e.Iters)
	if e.NotStarted {
		return fmt.Sprintf("deadline (virtual time %.3f ms) passed before %s started", float64(e.Deadline)/1e6, at)
	}
	s := fmt.Sprintf("not finished by the deadline (virtual time %.3f ms), %s: %d of %d ranks unfinished", float64(e.Deadline)/1e6, at, e.Unfinished, e.Ranks)
	if len(e.Where) > 0 {
		s += ": " + strings.Join(e.Where, "; ")
		if e.Unfinished > len(e.Where) {
			s += "; …"
		}
	}
	return s
}

// deadlineWhere is how many unfinished ranks a DeadlineError describes.
const deadlineWhere = 4

// armDeadline schedules the check of the ranks of groups at o.Deadline for
// iteration it (of iters; the first warmup ones are warmups) and returns
// what disarms it. The check is a cluster-wide action (Scheduler: between
// windows on a partitioned cluster, with every partition stopped), so it
// may read every rank; it fails the first unfinished rank, which stops
// wait like any rank's error.
func (m *Comm) armDeadline(o RunOptions, groups [][]int, it, iters int) (disarm func()) {
	off := false
	tm := m.C.Scheduler().At(o.Deadline, func() {
		if off {
			return
		}
		e := &DeadlineError{Deadline: o.Deadline, Iteration: it + 1, Iters: iters, Warmup: it < o.Warmup}
		var first *rank
		for _, g := range groups {
			if f := m.tally(e, g); first == nil {
				first = f
			}
		}
		if first != nil {
			m.fail(first, e)
		}
	})
	return func() {
		off = true // a partitioned cluster's global events cannot be stopped
		tm.Stop()
	}
}

// tally counts the comm ranks cranks into e (Ranks, Unfinished, the Where
// of the first few unfinished) and returns the first unfinished one, nil
// when every one finished.
func (m *Comm) tally(e *DeadlineError, cranks []int) (first *rank) {
	for _, cr := range cranks {
		e.Ranks++
		r := m.ranks[cr]
		if !r.active {
			continue
		}
		e.Unfinished++
		if first == nil {
			first = r
		}
		if len(e.Where) < deadlineWhere {
			e.Where = append(e.Where, r.position())
		}
	}
	return first
}

// position says where an active rank is in its program.
func (r *rank) position() string {
	s := fmt.Sprintf("rank %d at step %d of %d", r.id, r.pc, len(r.prog))
	if r.pc < len(r.prog) {
		st := r.prog[r.pc]
		switch {
		case st.Kind == Wait && r.waiting:
			s += fmt.Sprintf(" (wait for rank %d tag %d since %.3f ms)", r.members[st.Peer], st.Tag, float64(r.waitFrom)/1e6)
		case st.Kind == Wait:
			s += fmt.Sprintf(" (wait for rank %d tag %d)", r.members[st.Peer], st.Tag)
		case st.Kind == Drain && r.waiting:
			s += fmt.Sprintf(" (drain: its writes to complete, since %.3f ms)", float64(r.waitFrom)/1e6)
		default:
			s += " (" + st.Kind.String() + ")"
		}
	}
	return s + fmt.Sprintf(", %d write(s) in flight", r.inflight)
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
	if m.split {
		return Result{}, errSplit
	}
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
	label := fmt.Sprintf("%s %s %s", a.Op, a.Name, units.FormatBytes(size))
	var total sim.Time
	iters := o.Warmup + o.Iters
	for it := 0; it < iters; it++ {
		t0 := m.now()
		if it == o.Warmup {
			res.Start = t0
		}
		disarm := func() {}
		if o.Deadline > 0 {
			if t0 >= o.Deadline {
				return res, fmt.Errorf("%s/%s %d bytes: %w", a.Op, a.Name, size, &DeadlineError{Deadline: o.Deadline,
					Iteration: it + 1, Iters: iters, Warmup: it < o.Warmup, Unfinished: n * len(groups), Ranks: n * len(groups), NotStarted: true})
			}
			disarm = m.armDeadline(o, groups, it, iters)
		}
		for _, g := range groups {
			m.launch(plan, g, label, t0)
		}
		err := m.wait()
		disarm()
		if err != nil {
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
// the same as the previous one are run once); on an error, the rows of
// the sizes that finished.
func (m *Comm) Sweep(a *Algorithm, sizes []uint64, o RunOptions) ([]Result, error) {
	run := m.SweepSizes(sizes)
	var rs []Result
	for i, s := range run {
		if o.Before != nil {
			o.Before(i, len(run), s)
		}
		r, err := m.Run(a, s, o)
		if err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// SweepSizes is the sizes Sweep runs: each rounded (RoundSize), without
// one that rounds to the same as the one before.
func (m *Comm) SweepSizes(sizes []uint64) []uint64 {
	var run []uint64
	for _, s := range sizes {
		if r := RoundSize(m.Size(), s); len(run) == 0 || r != run[len(run)-1] {
			run = append(run, r)
		}
	}
	return run
}

// Sizes returns min, 2·min, 4·min, … up to max (nccl-tests -b/-e/-f 2).
func Sizes(minB, maxB uint64) []uint64 { return SizesBy(minB, maxB, 2) }

// SizesBy returns min, f·min, f²·min, … up to max: nccl-tests' -b, -e and
// -f (stepfactor). A factor below 2 is taken as 2 (1 would never end).
func SizesBy(minB, maxB, factor uint64) []uint64 {
	factor = max(factor, 2)
	var s []uint64
	for b := max(minB, 1); b <= maxB; b *= factor {
		s = append(s, b)
		if b > maxB/factor { // the next step is past maxB (or would wrap)
			break
		}
	}
	return s
}

// SizeRange is a size sweep: nccl-tests' -b (Min), -e (Max) and -f
// (Factor).
type SizeRange struct{ Min, Max, Factor uint64 }

// Sizes lists the range's sizes.
func (r SizeRange) Sizes() []uint64 { return SizesBy(r.Min, r.Max, r.Factor) }

// MaxSizeFactor bounds a SizeRange's factor: past it, a range of sizes
// up to 1 TiB has at most three sizes, and the factor is more likely a
// typo than meant.
const MaxSizeFactor = 1024

// ParseSizeRange reads "min:max:factor", "min:max" (factor 2) or one
// size (min = max): sizes as ParseSize reads them, at least 1, max ≥ min;
// factor an integer in [2, MaxSizeFactor]. The error names the part that
// is wrong and why.
func ParseSizeRange(s string) (SizeRange, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 3 {
		return SizeRange{}, fmt.Errorf("size range %q: %d parts; want min:max:factor, min:max or one size", s, len(parts))
	}
	lo, hi := parts[0], parts[0]
	if len(parts) > 1 {
		hi = parts[1]
	}
	var r SizeRange
	for _, b := range []struct {
		name, text string
		v          *uint64
	}{{"min", lo, &r.Min}, {"max", hi, &r.Max}} {
		v, err := units.ParseSize(b.text)
		if err != nil {
			return SizeRange{}, fmt.Errorf("size range %q: %s: %v", s, b.name, err)
		}
		if v == 0 {
			return SizeRange{}, fmt.Errorf("size range %q: %s is 0; sizes are at least 1 byte", s, b.name)
		}
		*b.v = v
	}
	if r.Max < r.Min {
		return SizeRange{}, fmt.Errorf("size range %q: max %s is below min %s", s, units.FormatBytes(r.Max), units.FormatBytes(r.Min))
	}
	r.Factor = 2
	if len(parts) == 3 {
		f, err := strconv.ParseUint(strings.TrimSpace(parts[2]), 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) || err == nil && f > MaxSizeFactor:
			return SizeRange{}, fmt.Errorf("size range %q: factor %s is above %d", s, parts[2], MaxSizeFactor)
		case err != nil:
			return SizeRange{}, fmt.Errorf("size range %q: factor %q is not an integer", s, parts[2])
		case f < 2:
			return SizeRange{}, fmt.Errorf("size range %q: factor %d is below 2 (each size is factor × the one before)", s, f)
		}
		r.Factor = f
	}
	return r, nil
}

// InPlaceNote is the table's line on nccl-tests' in-place column group,
// which this table does not have.
const InPlaceNote = "# in-place: not run (every rank has separate send and receive buffers here, and the plans are built for them)"

// WriteTable prints rows as nccl-tests prints its table: the same columns,
// widths and number formats (times in µs of virtual time), then the check
// column, and nccl-tests' footer: the rows with wrong elements and the
// mean bus bandwidth. Only the out-of-place column group is printed; the
// header says why (InPlaceNote).
func WriteTable(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "#\n%s\n", InPlaceNote)
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place\n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "check")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "")
	var sum float64
	failed := 0
	for _, r := range rs {
		redop := "sum"
		if r.Op == AllGather || r.Op == AllToAll || r.Op == Broadcast {
			redop = "none"
		}
		wrong := "N/A"
		if r.Wrong >= 0 {
			wrong = cFloat(float64(r.Wrong))
		}
		fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d  %7s  %6s  %6s  %6s  %s\n", r.Bytes, r.Count, "float", redop, r.Root,
			ncclFloat(float64(r.TimeNs)/1e3, 7), ncclFloat(r.AlgBW, 6), ncclFloat(r.BusBW, 6), wrong, r.Check)
		sum += r.BusBW
		if r.Check == CheckFailed {
			failed++
		}
	}
	if len(rs) == 0 {
		return
	}
	verdict := "OK"
	if failed > 0 {
		verdict = "FAILED"
	}
	// "%-20s : %g %s" as nccl-tests' footer, the last %s empty (no
	// expected bandwidth given): hence the space at the end of the line.
	fmt.Fprintf(w, "# %-20s : %d %s\n", "Out of bounds values", failed, verdict)
	fmt.Fprintf(w, "# %-20s : %s \n#\n", "Avg bus bandwidth", cFloat(sum/float64(len(rs))))
}

// cFloat is v as C's printf %g prints it: 6 significant digits, trailing
// zeros dropped, e notation below 1e-4 and from 1e6 on.
func cFloat(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// ncclFloat is v right-aligned in width columns as nccl-tests' getFloatStr
// prints a table cell: with 2 decimals if that fits, else 1, else none,
// else in e notation (1 decimal from width 7 on).
func ncclFloat(v float64, width int) string {
	for _, p := range []int{2, 1, 0} {
		if s := strconv.FormatFloat(v, 'f', p, 64); len(s) <= width {
			return fmt.Sprintf("%*s", width, s)
		}
	}
	p := 0
	if width >= 7 {
		p = 1
	}
	return fmt.Sprintf("%*.*e", width, p, v)
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
