package fabric

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/sim"
)

// The ToR tests run on one plane of 3 T0 × 2 hosts and 4 T1 (spines):
// sender host 0 below p0.t0.0, receiver host 5 below p0.t0.2 (its port 1).
const (
	torSender   = 0
	torReceiver = 5
	torSport    = 0xc123
)

func torClos(t interface{ Fatalf(string, ...any) }, mode ForwardingMode, cfg *TorMulticastConfig) (*sim.Loop, *Topology, []*recvHost) {
	loop := sim.NewLoop(sim.Options{Seed: 7})
	o := DefaultOptions(mode)
	o.TorMulticast = cfg
	topo := smallClos(t, loop, 1, 2, 3, 4, o)
	return loop, topo, attach(topo)
}

// rocev2 is one OrderRE-relevant frame: an RC WRITE (data) or ACK from
// host src to host dst, with path fields (path + 1; 0 = host address),
// the OrderRE bits of BTH byte 8, an FReTx copy count and a PSN.
type rocev2 struct {
	src, dst         int
	srcPath, dstPath int // path + 1; 0: the host address
	sport            uint16
	op               uint8
	flags            uint8
	copies           int
	psn              uint32
}

func (f rocev2) build(topo *Topology) *Packet {
	addr := func(h, path int) [16]byte {
		if path == 0 {
			return topo.HostAddr(h, 0)
		}
		return topo.HostPathAddr(h, 0, path-1)
	}
	payload := 12 + 16 + 64 // BTH, RETH, data
	if f.op == orderre.OpAck {
		payload = 12 + 4
	}
	p := BuildFrame(topo.Pool, FrameSpec{Src: addr(f.src, f.srcPath), Dst: addr(f.dst, f.dstPath), Sport: f.sport, Payload: payload, Stored: -1})
	b := p.Data[offBTH:]
	b[0] = f.op
	orderre.SetFlags(b, f.flags)
	if f.flags&orderre.FlagFReTx != 0 {
		orderre.SetCopies(b, f.copies)
	}
	b[9], b[10], b[11] = byte(f.psn>>16), byte(f.psn>>8), byte(f.psn)
	return p
}

func data(flags uint8, psn uint32) rocev2 {
	return rocev2{src: torSender, dst: torReceiver, dstPath: 1, sport: torSport, op: orderre.OpWriteFirst, flags: flags, psn: psn}
}

func fretx(copies int, psn uint32) rocev2 {
	f := data(orderre.FlagFReTx, psn)
	f.copies = copies
	f.dstPath = 4 // path 3: replaced by the fast paths
	return f
}

// ack is the receiver's ACK for a packet that arrived on path, with flags.
func ack(path int, flags uint8) rocev2 {
	return rocev2{src: torReceiver, dst: torSender, srcPath: path + 1, sport: torSport, op: orderre.OpAck, flags: flags}
}

// send puts f on its source host's NIC port and runs the loop.
func send(loop *sim.Loop, topo *Topology, f rocev2) {
	topo.HostPorts[f.src][0].Enqueue(f.build(topo))
	loop.Run()
}

func torCounters(t *testing.T, topo *Topology, sw string) TorMulticastCounters {
	t.Helper()
	c, ok := topo.Switch(sw).TorMulticastCounters()
	if !ok {
		t.Fatalf("%s is not a programmable ToR", sw)
	}
	return c
}

func checkBooks(t *testing.T, topo *Topology) {
	t.Helper()
	if err := topo.Conservation().Check(); err != nil {
		t.Fatal(err)
	}
	if topo.Pool.Live != 0 {
		t.Fatalf("%d packets leaked", topo.Pool.Live)
	}
}

// dstPathAt records, per switch, the destination path field of every
// frame it forwarded (switch name → "out-port:path" list).
func dstPathAt(topo *Topology) map[string][]string {
	m := map[string][]string{}
	for _, s := range topo.Switches {
		s.Trace = func(sw *Switch, p *Packet, out *Port) {
			m[sw.Name] = append(m[sw.Name], fmt.Sprintf("%s:%d", out.Name, binary.BigEndian.Uint16(p.Data[offIPv6Dst+8:])))
		}
	}
	return m
}

func TestTorReplicatesOntoFastPaths(t *testing.T) {
	for _, mode := range []ForwardingMode{ForwardECMP, ForwardStatic} {
		t.Run(mode.String(), func(t *testing.T) {
			loop, topo, hs := torClos(t, mode, &TorMulticastConfig{})
			send(loop, topo, data(orderre.FlagCreate, 1))
			for _, path := range []int{0, 1, 2} {
				send(loop, topo, ack(path, orderre.FlagRegister))
			}
			c := torCounters(t, topo, "p0.t0.0")
			if c.Groups != 1 || c.Created != 1 || c.Registers != 3 {
				t.Fatalf("after create + 3 registers: %+v", c)
			}
			if rc := torCounters(t, topo, "p0.t0.2"); rc.Groups != 0 || rc.Registers != 0 {
				t.Fatalf("the receiver's ToR kept state for a connection it only delivers: %+v", rc)
			}
			hs[torReceiver].got = nil
			var arrived []uint16 // dst path fields of what reached the receiver host
			hs[torReceiver].onRecv = func(p *Packet, in *Port) bool {
				arrived = append(arrived, binary.BigEndian.Uint16(p.Data[offIPv6Dst+8:]))
				return false
			}
			at := dstPathAt(topo)
			send(loop, topo, fretx(2, 77))
			// Two copies, on the first two fast paths (registration order):
			// paths 0 and 1, i.e. spines 0 and 1, each with its path field.
			if got, want := strings.Join(at["p0.t0.0"], " "), "p0.t0.0/2:1 p0.t0.0/3:2"; got != want {
				t.Fatalf("sender ToR sent %q, want %q", got, want)
			}
			for u := 0; u < 4; u++ {
				want := ""
				if u < 2 {
					want = fmt.Sprintf("p0.t1.%d/2:%d", u, u+1)
				}
				if got := strings.Join(at[fmt.Sprintf("p0.t1.%d", u)], " "); got != want {
					t.Fatalf("spine %d forwarded %q, want %q", u, got, want)
				}
			}
			// The receiver ToR gets both and delivers the first only.
			if got := strings.Join(at["p0.t0.2"], " "); got != "p0.t0.2/1:1" {
				t.Fatalf("receiver ToR delivered %q, want the first copy only", got)
			}
			if len(hs[torReceiver].got) != 1 || !slices.Equal(arrived, []uint16{1}) {
				t.Fatalf("receiver host got %d frames, paths %v", len(hs[torReceiver].got), arrived)
			}
			sc, rc := torCounters(t, topo, "p0.t0.0"), torCounters(t, topo, "p0.t0.2")
			if sc.FReTx != 1 || sc.Copies != 2 || sc.Duplicates != 0 {
				t.Fatalf("sender ToR: %+v", sc)
			}
			if rc.Duplicates != 1 || rc.FReTx != 0 || rc.Copies != 0 {
				t.Fatalf("receiver ToR: %+v", rc)
			}
			if d := topo.Switch("p0.t0.2").Ports[2+1].Counters.Drops[DropDuplicate]; d != 1 {
				t.Fatalf("receiver ToR's uplink from spine 1 counts %d duplicate drops", d)
			}
			if s := topo.Switch("p0.t0.0").Ports[0].Counters.Sent; s != 1 {
				t.Fatalf("sender ToR's host port counts %d frames made, want 1 extra copy", s)
			}
			// The next FReTx rotates on: paths 2 and 0.
			for k := range at {
				delete(at, k)
			}
			send(loop, topo, fretx(2, 78))
			if got, want := strings.Join(at["p0.t0.0"], " "), "p0.t0.0/4:3 p0.t0.0/2:1"; got != want {
				t.Fatalf("second FReTx: %q, want %q (paths 2 then 0)", got, want)
			}
			// A = 0 (the ToR's default: every fast path) and A > fast paths.
			for _, a := range []int{0, 9} {
				before := torCounters(t, topo, "p0.t0.0").Copies
				send(loop, topo, fretx(a, 100+uint32(a)))
				if n := torCounters(t, topo, "p0.t0.0").Copies - before; n != 3 {
					t.Fatalf("A=%d: %d copies, want 3 (every fast path)", a, n)
				}
			}
			if n := len(hs[torReceiver].got); n != 4 {
				t.Fatalf("receiver host got %d FReTx, want one per PSN (4)", n)
			}
			checkBooks(t, topo)
		})
	}
}

func TestTorGroupLifecycle(t *testing.T) {
	loop, topo, hs := torClos(t, ForwardECMP, &TorMulticastConfig{IdleTimeout: 20 * time.Microsecond})
	sw := "p0.t0.0"
	send(loop, topo, data(orderre.FlagCreate, 1))
	send(loop, topo, data(0, 2)) // plain data: no signal
	if c := torCounters(t, topo, sw); c.Created != 1 || c.Groups != 1 {
		t.Fatalf("create: %+v", c)
	}
	send(loop, topo, ack(1, orderre.FlagRegister))
	send(loop, topo, ack(3, orderre.FlagRegister))
	send(loop, topo, ack(1, orderre.FlagRegister)) // again: no change
	send(loop, topo, ack(1, orderre.FlagUnregister))
	send(loop, topo, ack(2, orderre.FlagUnregister)) // never registered
	if c := torCounters(t, topo, sw); c.Registers != 2 || c.Unregisters != 1 || c.Created != 1 {
		t.Fatalf("register/unregister: %+v", c)
	}
	// One fast path left (3): the FReTx goes there only.
	at := dstPathAt(topo)
	send(loop, topo, fretx(2, 9))
	if got := strings.Join(at[sw], " "); got != "p0.t0.0/5:4" {
		t.Fatalf("FReTx with fast path 3 only: %q", got)
	}
	send(loop, topo, data(orderre.FlagDelete, 10))
	if c := torCounters(t, topo, sw); c.Deleted != 1 || c.Groups != 0 {
		t.Fatalf("delete: %+v", c)
	}
	// An FReTx for no group goes as addressed (path 3 → spine 3) and
	// creates the group on demand; so does an ACK for an unknown group.
	for k := range at {
		delete(at, k)
	}
	send(loop, topo, fretx(2, 11))
	if got := strings.Join(at[sw], " "); got != "p0.t0.0/5:4" {
		t.Fatalf("FReTx without a group: %q, want as addressed", got)
	}
	if c := torCounters(t, topo, sw); c.Created != 2 || c.Groups != 1 || c.Copies != 1 {
		t.Fatalf("on-demand creation by an FReTx: %+v", c)
	}
	other := ack(0, orderre.FlagRegister)
	other.sport++
	send(loop, topo, other)
	if c := torCounters(t, topo, sw); c.Created != 3 || c.Groups != 2 || c.Registers != 3 {
		t.Fatalf("on-demand creation by an ACK: %+v", c)
	}
	if c := torCounters(t, topo, sw); c.Registers != 3 {
		t.Fatalf("%+v", c)
	}
	// A lost delete: nothing refreshes the groups for the idle timeout.
	// r1 ≤ t1 < r2 ≤ t2 (r: a group's refresh at the ToR).
	idle := sim.Time(20 * time.Microsecond)
	send(loop, topo, ack(0, orderre.FlagRegister)) // refreshes the first at r1
	t1 := loop.Now()
	send(loop, topo, other) // the second at r2
	t2 := loop.Now()
	if c := torCounters(t, topo, sw); c.Groups != 2 || c.Aged != 0 || t2-t1 >= idle {
		t.Fatalf("before the idle timeout: %+v (t2-t1 %v)", c, t2-t1)
	}
	loop.RunUntil(t1 + idle)
	if c := torCounters(t, topo, sw); c.Groups != 1 || c.Aged != 1 {
		t.Fatalf("one group past its idle timeout: %+v", c)
	}
	loop.RunUntil(t2 + idle)
	if c := torCounters(t, topo, sw); c.Groups != 0 || c.Aged != 2 {
		t.Fatalf("both idle: %+v", c)
	}
	// The next signal reclaims them: the counts stay.
	send(loop, topo, data(orderre.FlagCreate, 1))
	if c := torCounters(t, topo, sw); c.Groups != 1 || c.Aged != 2 || c.Created != 4 {
		t.Fatalf("after reclaiming: %+v", c)
	}
	if len(hs[torReceiver].got) == 0 {
		t.Fatal("nothing reached the receiver")
	}
	checkBooks(t, topo)
}

func TestTorTableFull(t *testing.T) {
	loop, topo, hs := torClos(t, ForwardECMP, &TorMulticastConfig{Groups: 2})
	for i := 0; i < 3; i++ {
		f := data(orderre.FlagCreate, 1)
		f.sport += uint16(i)
		send(loop, topo, f)
	}
	c := torCounters(t, topo, "p0.t0.0")
	if c.Groups != 2 || c.Created != 2 || c.TableFull != 1 {
		t.Fatalf("3 creates in a table of 2: %+v", c)
	}
	// The refused connection's FReTx goes as addressed; registering for
	// it is refused too.
	a := ack(0, orderre.FlagRegister)
	a.sport += 2
	send(loop, topo, a)
	f := fretx(3, 5)
	f.sport += 2
	hs[torReceiver].got = nil
	send(loop, topo, f)
	c = torCounters(t, topo, "p0.t0.0")
	if c.TableFull != 3 || c.Registers != 0 || c.Copies != 0 || c.FReTx != 1 || len(hs[torReceiver].got) != 1 {
		t.Fatalf("a full table: %+v, receiver got %d", c, len(hs[torReceiver].got))
	}
	// Deleting one makes room.
	send(loop, topo, data(orderre.FlagDelete, 9))
	send(loop, topo, f)
	if c = torCounters(t, topo, "p0.t0.0"); c.Created != 3 || c.Groups != 2 {
		t.Fatalf("after a delete: %+v", c)
	}
	checkBooks(t, topo)
}

// TestTorSameT0: sender and receiver below one ToR — it replicates and
// de-duplicates at once, so the host gets one copy.
func TestTorSameT0(t *testing.T) {
	loop, topo, hs := torClos(t, ForwardECMP, &TorMulticastConfig{})
	f := data(orderre.FlagCreate, 1)
	f.dst = 1
	send(loop, topo, f)
	for _, path := range []int{0, 2} {
		a := ack(path, orderre.FlagRegister)
		a.src = 1
		send(loop, topo, a)
	}
	r := fretx(2, 3)
	r.dst = 1
	send(loop, topo, r)
	c := torCounters(t, topo, "p0.t0.0")
	if c.Copies != 2 || c.Duplicates != 1 || len(hs[1].got) != 2 {
		t.Fatalf("same T0: %+v, host 1 got %d (create + one FReTx)", c, len(hs[1].got))
	}
	checkBooks(t, topo)
}

func TestTorDedupWindow(t *testing.T) {
	loop, topo, hs := torClos(t, ForwardECMP, &TorMulticastConfig{DedupWindow: 10 * time.Microsecond, DedupEntries: 3})
	rtor := topo.Switch("p0.t0.2")
	fromSpine := rtor.Ports[2].Peer // p0.t1.0's port toward the receiver's ToR
	steps := []struct {
		psn     uint32
		dup     bool
		comment string
	}{
		{1, false, "first copy: recorded (1a)"},
		{1, true, "within the window"},
		{1, false, "after the window (see below): a new repair, recorded again (1b)"},
		{2, false, "recorded"},
		{3, false, "the table is full: evicts the oldest, 1a (1b stays)"},
		{1, true, "1b is within the window"},
		{4, false, "evicts 1b"},
		{5, false, "evicts 2"},
		{2, false, "evicted: forwarded again"},
		{1, false, "evicted: forwarded again"},
	}
	delivered, dups := 0, uint64(0)
	for i, st := range steps {
		if i == 2 {
			loop.RunFor(10 * time.Microsecond)
		}
		fromSpine.Enqueue(fretx(1, st.psn).build(topo))
		loop.Run()
		if !st.dup {
			delivered++
		} else {
			dups++
		}
		c, _ := rtor.TorMulticastCounters()
		if c.Duplicates != dups || len(hs[torReceiver].got) != delivered {
			t.Fatalf("step %d (PSN %d: %s): %d duplicates, %d delivered; want %d, %d", i, st.psn, st.comment, c.Duplicates, len(hs[torReceiver].got), dups, delivered)
		}
	}
	if d := rtor.Ports[2].Counters.Drops[DropDuplicate]; d != dups {
		t.Fatalf("the ingress port counts %d duplicate drops, want %d", d, dups)
	}
	checkBooks(t, topo)
}

// TestTorOff: without the feature nothing is replicated or dropped, and
// with it a frame OrderRE does not signal on passes untouched.
func TestTorOff(t *testing.T) {
	loop, topo, hs := torClos(t, ForwardECMP, nil)
	for _, s := range topo.Switches {
		if _, ok := s.TorMulticastCounters(); ok || s.tor {
			t.Fatalf("%s is a programmable ToR without the option", s.Name)
		}
	}
	if _, ok := topo.TorMulticastCounters(); ok {
		t.Fatal("the fabric reports ToR counters without the option")
	}
	script := func(loop *sim.Loop, topo *Topology) {
		send(loop, topo, data(orderre.FlagCreate, 1))
		for _, path := range []int{0, 1, 2} {
			send(loop, topo, ack(path, orderre.FlagRegister))
		}
		send(loop, topo, fretx(3, 5))
		send(loop, topo, fretx(3, 5))
	}
	script(loop, topo)
	if n := len(hs[torReceiver].got); n != 3 {
		t.Fatalf("ToR off: receiver got %d frames, want 3 (each as addressed)", n)
	}
	checkBooks(t, topo)

	// On, but the frames are not OrderRE's: another UDP port, an opcode
	// neither WRITE nor ACK, a short payload.
	loop, topo, hs = torClos(t, ForwardECMP, &TorMulticastConfig{})
	send(loop, topo, data(orderre.FlagCreate, 1))
	for _, path := range []int{0, 1, 2} {
		send(loop, topo, ack(path, orderre.FlagRegister))
	}
	base := torCounters(t, topo, "p0.t0.0")
	for i, mut := range []func(p *Packet){
		func(p *Packet) { binary.BigEndian.PutUint16(p.Data[offUDPDport:], 4792) },
		func(p *Packet) { p.Data[offBTH] = 0x04 },  // RC SEND Only
		func(p *Packet) { p.Data[offIPv6+6] = 59 }, // no next header
	} {
		p := fretx(3, uint32(20+i)).build(topo)
		mut(p)
		topo.HostPorts[torSender][0].Enqueue(p)
		loop.Run()
	}
	short := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(torSender, 0), Dst: topo.HostPathAddr(torReceiver, 0, 3), Sport: torSport, Payload: 8, Stored: -1})
	short.Data[offBTH] = orderre.OpWriteFirst
	topo.HostPorts[torSender][0].Enqueue(short)
	loop.Run()
	if c := torCounters(t, topo, "p0.t0.0"); c != base {
		t.Fatalf("non-OrderRE frames changed the ToR: %+v, was %+v", c, base)
	}
	if n := len(hs[torReceiver].got); n != 1+4 {
		t.Fatalf("receiver got %d frames, want the create and the 4 others once each", n)
	}
	checkBooks(t, topo)
}

func TestTorConfig(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	spec := ClosSpec{Planes: 1, HostsPerT0: 2, T0: 2, T1: 2, HostRate: 100e9, FabricRate: 100e9}
	for _, c := range []struct {
		mode ForwardingMode
		cfg  TorMulticastConfig
		want string
	}{
		{ForwardUSID, TorMulticastConfig{}, "torMulticast: needs ecmp or static"},
		{ForwardECMP, TorMulticastConfig{Groups: -1}, "torMulticast.groups: must be 1..1048576"},
		{ForwardECMP, TorMulticastConfig{Groups: MaxTorGroups + 1}, "torMulticast.groups"},
		{ForwardECMP, TorMulticastConfig{IdleTimeout: time.Nanosecond}, "torMulticast.idleTimeout: must be 1µs..10s"},
		{ForwardECMP, TorMulticastConfig{DedupEntries: -3}, "torMulticast.dedupEntries"},
		{ForwardStatic, TorMulticastConfig{DedupWindow: 2 * time.Second}, "torMulticast.dedupWindow: must be 1µs..1s"},
	} {
		o := DefaultOptions(c.mode)
		o.TorMulticast = &c.cfg
		_, err := BuildClos(loop, spec, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %+v: %v, want %q", c.mode, c.cfg, err, c.want)
		}
		if _, err := BuildFatTree(loop, FatTreeSpec{K: 4, Rate: 100e9}, o); err == nil {
			t.Errorf("fat-tree %v %+v accepted", c.mode, c.cfg)
		}
	}
	o := DefaultOptions(ForwardECMP)
	o.TorMulticast = &TorMulticastConfig{}
	ft, err := BuildFatTree(loop, FatTreeSpec{K: 4, Rate: 100e9}, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range ft.Switches {
		if s.torm != nil {
			n++
			if s.Tier != 0 || s.torm.cfg != DefaultTorMulticast() {
				t.Fatalf("%s (tier %d) is a ToR with %+v", s.Name, s.Tier, s.torm.cfg)
			}
		}
	}
	if n != 8 {
		t.Fatalf("%d programmable ToRs in a k=4 fat-tree, want its 8 edge switches", n)
	}
}

// torScript drives a seeded mix of signals, data and FReTx (with loss on
// one spine) and returns the counters and the hops.
func torScript(t *testing.T, seed uint64) (TorMulticastCounters, string) {
	loop, topo, _ := torClos(t, ForwardECMP, &TorMulticastConfig{Groups: 8, IdleTimeout: 30 * time.Microsecond, DedupEntries: 16})
	topo.Switch("p0.t1.1").Ports[2].Tx.Loss = NewBernoulli(0.3, seed, "tor-test")
	hops := traceHops(topo)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 400; i++ {
		conn := uint16(r.IntN(12))
		var f rocev2
		switch r.IntN(6) {
		case 0:
			f = data(orderre.FlagCreate, uint32(i))
		case 1:
			f = data(orderre.FlagDelete, uint32(i))
		case 2, 3:
			f = ack(r.IntN(4), []uint8{orderre.FlagRegister, orderre.FlagUnregister}[r.IntN(2)])
		default:
			f = fretx(r.IntN(4), uint32(r.IntN(64)))
		}
		f.sport += conn
		topo.HostPorts[f.src][0].Enqueue(f.build(topo))
		loop.RunFor(time.Duration(r.IntN(3000)) * time.Nanosecond)
	}
	loop.Run()
	checkBooks(t, topo)
	c, _ := topo.TorMulticastCounters()
	return c, strings.Join(*hops, " ")
}

func TestTorDeterministic(t *testing.T) {
	c1, h1 := torScript(t, 3)
	c2, h2 := torScript(t, 3)
	if c1 != c2 || h1 != h2 {
		t.Fatalf("same input, different runs:\n%+v\n%+v", c1, c2)
	}
	if c1.Copies == 0 || c1.Duplicates == 0 || c1.Aged == 0 || c1.Deleted == 0 || c1.TableFull == 0 || c1.Unregisters == 0 {
		t.Fatalf("the script did not exercise the ToR: %+v", c1)
	}
	if c3, _ := torScript(t, 4); c3 == c1 {
		t.Fatalf("another seed gave the same counters %+v", c3)
	}
}

// TestTorSteadyStateZeroAllocs: once the groups exist and the dedup table
// is full, an FReTx's replication and de-duplication allocate nothing.
func TestTorSteadyStateZeroAllocs(t *testing.T) {
	loop, topo, _ := torClos(t, ForwardECMP, &TorMulticastConfig{DedupEntries: 64})
	send(loop, topo, data(orderre.FlagCreate, 1))
	for _, path := range []int{0, 1, 2} {
		send(loop, topo, ack(path, orderre.FlagRegister))
	}
	psn := uint32(0)
	round := func() {
		for i := 0; i < 100; i++ {
			psn++
			topo.HostPorts[torSender][0].Enqueue(fretx(2, psn).build(topo))
			topo.HostPorts[torReceiver][0].Enqueue(ack(int(psn%3), orderre.FlagRegister).build(topo))
			loop.Run()
		}
	}
	round()
	round()
	if a := testing.AllocsPerRun(20, round); a/100 > 0.01 {
		t.Fatalf("%v allocations per 100 FReTx", a)
	}
	sc, rc := torCounters(t, topo, "p0.t0.0"), torCounters(t, topo, "p0.t0.2")
	if sc.Copies != 2*sc.FReTx || rc.Duplicates != sc.FReTx || sc.FReTx < 2000 {
		t.Fatalf("sender %+v, receiver %+v: want 2 copies and 1 duplicate per FReTx", sc, rc)
	}
	checkBooks(t, topo)
}

// FuzzTorMulticast feeds arbitrary frames, and valid headers with
// arbitrary RoCEv2 payloads, to programmable ToRs from a host port and
// from a spine: nothing panics, every frame is accounted for.
func FuzzTorMulticast(f *testing.F) {
	loop, topo, _ := torClos(f, ForwardECMP, &TorMulticastConfig{})
	for _, r := range []rocev2{data(orderre.FlagCreate, 1), ack(2, orderre.FlagRegister), fretx(2, 7), fretx(0, 7)} {
		p := r.build(topo)
		f.Add(append([]byte(nil), p.Data...), uint8(0), uint16(0))
		f.Add(append([]byte(nil), p.Data[offBTH:]...), uint8(1), uint16(3))
		p.Release()
	}
	_ = loop
	f.Fuzz(func(t *testing.T, raw []byte, how uint8, path uint16) {
		loop, topo, _ := torClos(t, []ForwardingMode{ForwardECMP, ForwardStatic}[how>>7], &TorMulticastConfig{Groups: 4, DedupEntries: 4})
		build := func() *Packet {
			if how&1 == 0 {
				n := min(len(raw), topo.Pool.LargeCap)
				p := topo.Pool.Get(n)
				copy(p.Data, raw)
				return p
			}
			// Valid headers, the fuzzer's RoCEv2 payload and path field.
			n := min(len(raw), 1024)
			p := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostPathAddr(torReceiver, 0, int(path%5)), Dst: topo.HostAddr(torSender, 0),
				Sport: torSport, Payload: n, Stored: -1})
			copy(p.Data[offBTH:], raw[:n])
			return p
		}
		// The ACK direction needs a group with fast paths for an FReTx to
		// replicate: prime both ToRs with the fuzzer's frame as an ACK,
		// then send it into each ToR from its host and from a spine.
		for i := 0; i < 3; i++ {
			for _, port := range []*Port{topo.Switch("p0.t0.0").Ports[2+i%2], topo.Switch("p0.t0.0").Ports[0],
				topo.Switch("p0.t0.2").Ports[1], topo.Switch("p0.t0.2").Ports[3]} {
				port.Peer.Enqueue(build())
			}
			loop.Run()
		}
		checkBooks(t, topo)
	})
}
