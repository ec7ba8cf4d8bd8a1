package main

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/compose/labfabric"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/units"
)

func init() { benchCommands = append(benchCommands, newBenchLabFabricCmd) }

// benchLabSecret is the in-process lab's secret (nothing leaves loopback).
var benchLabSecret = []byte("vcluster bench lab-fabric secret, loopback only")

// labLoad is the offered load of one step: every host sends to the
// next on every plane, round robin over planes.
type labLoad struct {
	hosts  []*labfabric.SyntheticHost
	frames [][][]byte // [host][plane] the Ethernet frame host → host+1
	planes []int
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type labStep struct {
	rate           float64 // frames/s offered
	sent, received uint64
	p50, p99, max  time.Duration
	wall, cpu      time.Duration
	fabricDrops    uint64
	dropReasons    string
	allocs         float64 // heap allocations per frame sent (whole process)
	delivered      float64
	keptUp, ok     bool
}

// run offers rate frames/s for d and waits for the stragglers.
func (l *labLoad) run(f *labfabric.Fabric, rate float64, d time.Duration, lagBound time.Duration) (labStep, error) {
	st := labStep{rate: rate}
	var rx0 uint64
	for _, h := range l.hosts {
		rx0 += h.Received()
	}
	s0, err := f.Status()
	if err != nil {
		return st, err
	}
	if err := f.ResetLag(); err != nil {
		return st, err
	}
	var sent atomic.Uint64
	var wg sync.WaitGroup
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	w0, c0 := time.Now(), cpuTime()
	per := rate / float64(len(l.hosts))
	for i, h := range l.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			const batch = 32
			ms := make([]tunnel.Message, batch)
			for k := range ms {
				ms[k].Buf = make([]byte, 0, tunnel.MaxFrame)
			}
			start := time.Now()
			var n uint64
			pl := 0
			for {
				el := time.Since(start)
				if el >= d {
					break
				}
				due := uint64(per * el.Seconds())
				for n < due {
					k := int(min(due-n, batch))
					for j := range k {
						plane := l.planes[pl%len(l.planes)]
						pl++
						fr := l.frames[i][plane]
						ms[j].Buf = h.Seal(ms[j].Buf[:0], tunnel.KindData, plane, fr, uint32(len(fr)+fabric.FCSLen), 0)
						ms[j].N = len(ms[j].Buf)
					}
					w, _ := h.SendBatch(ms[:k])
					n += uint64(k)
					sent.Add(uint64(w))
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	// Stragglers: whatever is still queued in the fabric or a socket.
	drain := time.Now().Add(500 * time.Millisecond)
	var rx uint64
	for time.Now().Before(drain) {
		rx = 0
		for _, h := range l.hosts {
			rx += h.Received()
		}
		if rx-rx0 >= sent.Load() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	st.wall, st.cpu = time.Since(w0), cpuTime()-c0
	s1, err := f.Status()
	if err != nil {
		return st, err
	}
	st.sent, st.received = sent.Load(), rx-rx0
	runtime.ReadMemStats(&m1)
	if st.sent > 0 {
		st.allocs = float64(m1.Mallocs-m0.Mallocs) / float64(st.sent)
	}
	for _, r := range tunnel.Reasons() {
		if n := s1.Drops[r.String()] - s0.Drops[r.String()]; n > 0 {
			st.fabricDrops += n
			st.dropReasons += fmt.Sprintf(" %s=%d", r, n)
		}
	}
	st.p50, st.p99, st.max = time.Duration(s1.Lag.P50Ns), time.Duration(s1.Lag.P99Ns), time.Duration(s1.Lag.MaxNs)
	if st.sent > 0 {
		st.delivered = float64(st.received) / float64(st.sent)
	}
	st.keptUp = st.p99 <= lagBound
	st.ok = st.delivered >= 0.99 && st.keptUp && float64(st.sent) >= 0.95*rate*d.Seconds()
	return st, nil
}

func printLabStep(w io.Writer, s labStep) {
	verdict := "ok"
	switch {
	case s.delivered < 0.99:
		verdict = "lost"
	case !s.keptUp:
		verdict = "lagging"
	case !s.ok:
		verdict = "senders short"
	}
	fmt.Fprintf(w, "%12.0f %10d %10d %9.2f%% %8d %10v %10v %10v %9v %9v %5.0f%% %7.2f  %s\n", s.rate, s.sent, s.received, 100*s.delivered, s.fabricDrops,
		s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.max.Round(time.Microsecond),
		s.wall.Round(time.Millisecond), s.cpu.Round(time.Millisecond), 100*s.cpu.Seconds()/s.wall.Seconds(), s.allocs, verdict+s.dropReasons)
}

func newBenchLabFabricCmd() *cobra.Command {
	var hosts, payload int
	var duration, lagBound time.Duration
	var planeSpeed string
	var startRate, maxRate float64
	cmd := &cobra.Command{
		Use:   "lab-fabric",
		Short: "Lab fabric capacity: frames/s through `vcluster fabric`'s tunnels and real-time loop, and its lag at 70% of that",
		Long: `bench lab-fabric runs a lab fabric (compose/labfabric) in this process and
--hosts synthetic hosts on loopback UDP, each sending authenticated Data
frames (real IPv6/UDP frames) to the next host on every plane. It steps
the offered rate up (×1.5 from --start-rate) until fewer than 99% of the
frames arrive or the loop's p99 lag exceeds --lag-bound: the last rate
that passed is the capacity. It then runs at 70% of the capacity and
reports the lag. CPU time is the whole process's (fabric and hosts).`,
		Example: `  vcluster bench lab-fabric --hosts 8 --duration 5s`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxRate < startRate {
				return usageError(fmt.Errorf("--max-rate %.0f is below --start-rate %.0f", maxRate, startRate))
			}
			bps, err := units.ParseSpeed(planeSpeed)
			if err != nil {
				return usageError(fmt.Errorf("--plane-speed: %w", err))
			}
			path, sets, err := configSources(cmd)
			if err != nil {
				return err
			}
			sets = append([]string{"fabric.preset=C"}, sets...)
			sets = append(sets, "fabric.hosts="+strconv.Itoa(hosts))
			lab, err := labspec.Resolve(path, sets, bps)
			if err != nil {
				return usageError(err)
			}
			f, err := labfabric.New(labfabric.Options{Lab: lab, Secret: benchLabSecret, Listen: "127.0.0.1:0", API: "127.0.0.1:0", SendQueue: 1 << 14})
			if err != nil {
				return err
			}
			topo := f.Topology()
			load := &labLoad{planes: f.Planes()}
			pool := fabric.NewPool(topo.Pool.LargeCap)
			for i := range topo.Hosts {
				dst := (i + 1) % topo.Hosts
				load.frames = append(load.frames, make([][]byte, topo.Planes))
				for pl := range topo.Planes {
					spec := fabric.FrameSpec{Src: topo.HostAddr(i, pl), Dst: topo.HostAddr(dst, pl), Sport: uint16(1000 + i), Flow: uint32(i), Payload: payload, Stored: -1}
					if topo.Mode == fabric.ForwardUSID {
						o := topo.PathUSID(i, dst, pl, 0)
						spec.Outer = &o
					}
					p := fabric.BuildFrame(pool, spec)
					load.frames[i][pl] = append([]byte(nil), p.Data...)
					p.Release()
				}
			}
			f.Start()
			defer f.Stop()
			defer func() {
				for _, h := range load.hosts {
					h.Close()
				}
			}()
			for i := range topo.Hosts {
				h, err := labfabric.NewSyntheticHost(lab, benchLabSecret, i, f.TunnelAddr(), 0)
				if err != nil {
					return err
				}
				load.hosts = append(load.hosts, h)
				if err := h.Attach(load.planes, 10*time.Second); err != nil {
					return fmt.Errorf("host %d: %w", i, err)
				}
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "lab fabric: %d hosts, planes %v, %s, %s; frames of %d B (payload %d B), %v per step, loop keeps up: p99 lag ≤ %v\n",
				topo.Hosts, load.planes, topo.Mode, lab.Scaling, len(load.frames[0][0]), payload, duration, lagBound)
			hdr := fmt.Sprintf("%12s %10s %10s %10s %8s %10s %10s %10s %9s %9s %6s %7s  %s\n", "offered/s", "sent", "received", "delivered", "dropped", "lag p50", "lag p99", "lag max", "wall", "cpu", "cpu%", "allocs", "")
			fmt.Fprint(w, hdr)
			capacity := 0.0
			for rate := startRate; rate <= maxRate; rate *= 1.5 {
				if interrupted(cmd.Context()) {
					return interruptedError("", "")
				}
				st, err := load.run(f, rate, duration, lagBound)
				if err != nil {
					return err
				}
				printLabStep(w, st)
				if !st.ok {
					break
				}
				capacity = rate
			}
			if capacity == 0 {
				fmt.Fprintf(w, "capacity: below --start-rate %.0f frames/s\n", startRate)
				return nil
			}
			fmt.Fprintf(w, "capacity: %.0f frames/s (%.0f Mb/s of frames)\nat 70%%:\n", capacity, capacity*float64(len(load.frames[0][0])+fabric.FCSLen)*8/1e6)
			fmt.Fprint(w, hdr)
			st, err := load.run(f, 0.7*capacity, duration, lagBound)
			if err != nil {
				return err
			}
			printLabStep(w, st)
			fmt.Fprintf(w, "lag at 70%% of capacity: p50 %v, p99 %v, max %v\n", st.p50.Round(time.Microsecond), st.p99.Round(time.Microsecond), st.max.Round(time.Microsecond))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&hosts, "hosts", 8, "synthetic hosts (fabric.hosts)")
	limit(fl, "hosts", intIn(2, 1024, ""))
	fl.DurationVar(&duration, "duration", 5*time.Second, "offered-load time of each step")
	limit(fl, "duration", durationIn(100*time.Millisecond, time.Hour, false))
	fl.DurationVar(&lagBound, "lag-bound", 5*time.Millisecond, "the p99 lag under which the loop keeps up")
	limit(fl, "lag-bound", durationIn(time.Microsecond, time.Minute, false))
	fl.IntVar(&payload, "payload", 64, "UDP payload bytes of each frame")
	limit(fl, "payload", intIn(4, 8000, ""))
	fl.Float64Var(&startRate, "start-rate", 2000, "first offered rate, frames/s")
	limit(fl, "start-rate", floatIn(10, 1e7, false, "a rate", " frames/s"))
	fl.Float64Var(&maxRate, "max-rate", 1e7, "stop stepping above this rate, frames/s")
	limit(fl, "max-rate", floatIn(10, 1e8, false, "a rate", " frames/s"))
	fl.StringVar(&planeSpeed, "plane-speed", "10G", "host-link speed per plane (the links must not be the bottleneck)")
	limit(fl, "plane-speed", planeSpeedFlag())
	return cmd
}
