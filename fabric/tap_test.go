package fabric

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"testing"

	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/sim"
)

// tapped is one frame a test tap saw.
type tapped struct {
	ts      int64
	dir     pcap.Direction
	data    []byte
	origLen int
}

// tapLog is a FrameTap recording copies of what one port sees.
type tapLog struct{ got []tapped }

func (l *tapLog) TapFrame(ts int64, dir pcap.Direction, frame []byte, origLen int) {
	l.got = append(l.got, tapped{ts, dir, bytes.Clone(frame), origLen})
}

// seqs returns, per direction, the sequence numbers of the UDP test frames
// (FrameSpec.Seq) and the number of MAC control frames.
func (l *tapLog) seqs(dir pcap.Direction) (seqs []uint32, macc int) {
	for _, f := range l.got {
		if f.dir != dir {
			continue
		}
		if binary.BigEndian.Uint16(f.data[12:]) == EtherTypeMACC {
			macc++
			continue
		}
		off := offL4
		if f.data[offIPv6+6] == ProtoIPv6 {
			off += IPv6HeaderLen
		}
		seqs = append(seqs, binary.BigEndian.Uint32(f.data[off+UDPHeaderLen:]))
	}
	return seqs, macc
}

// loseSeq loses the test frame with one sequence number.
type loseSeq uint32

func (s loseSeq) Lose(p *Packet) bool {
	return len(p.Data) >= offL4+UDPHeaderLen+4 && binary.BigEndian.Uint32(p.Data[offL4+UDPHeaderLen:]) == uint32(s)
}

// A tap sees both directions of its port: what it sends, stamped at the
// start of transmission, and what its peer sent, stamped when the last bit
// arrives; a frame the link loses only at the sender; MAC control frames
// too. Tapping both ends of a cable and a switch port on the path gives
// the same bytes at each.
func TestTapBothDirections(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 1, DefaultOptions(ForwardECMP))
	attach(topo)
	names := []string{"h0/p0", "p0.t0.0/0", "p0.t1.0/1", "h3/p0"}
	logs := map[string]*tapLog{}
	for _, n := range names {
		logs[n] = &tapLog{}
		topo.Port(n).Tap(logs[n])
	}
	h0 := topo.Port("h0/p0")
	h0.Tx.Loss = loseSeq(3) // lost on h0's cable, after h0 sent it
	const gap = 10 * sim.Microsecond
	send := func(at sim.Time, from, to int, seq uint32) {
		loop.At(at, func() {
			topo.HostPorts[from][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(from, 0), Dst: topo.HostAddr(to, 0),
				Flow: seq, Payload: 1000 + int(seq), Stored: -1, Seq: seq}))
		})
	}
	for i := range uint32(5) {
		send(sim.Time(i)*gap, 0, 3, i)           // 0..4 h0 → h3 (3 lost on h0's cable)
		send(sim.Time(i)*gap+gap/2, 3, 0, 100+i) // 100..104 h3 → h0
	}
	loop.At(50*gap, func() { topo.Port("p0.t0.0/0").SendPause(3, 0) }) // a PFC resume to h0
	loop.Run()

	eq := func(what string, got []uint32, want ...uint32) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	out, maccOut := logs["h0/p0"].seqs(pcap.DirOutbound)
	in, maccIn := logs["h0/p0"].seqs(pcap.DirInbound)
	eq("h0/p0 outbound", out, 0, 1, 2, 3, 4)
	eq("h0/p0 inbound", in, 100, 101, 102, 103, 104)
	if maccOut != 0 || maccIn != 1 {
		t.Errorf("h0/p0: %d MAC control frames out, %d in; want 0, 1", maccOut, maccIn)
	}
	out, maccOut = logs["p0.t0.0/0"].seqs(pcap.DirOutbound)
	in, _ = logs["p0.t0.0/0"].seqs(pcap.DirInbound)
	eq("p0.t0.0/0 outbound", out, 100, 101, 102, 103, 104)
	eq("p0.t0.0/0 inbound (3 was lost)", in, 0, 1, 2, 4)
	if maccOut != 1 {
		t.Errorf("p0.t0.0/0: %d MAC control frames out, want 1", maccOut)
	}
	out, _ = logs["p0.t1.0/1"].seqs(pcap.DirOutbound)
	in, _ = logs["p0.t1.0/1"].seqs(pcap.DirInbound)
	eq("p0.t1.0/1 outbound (down to T0 1)", out, 0, 1, 2, 4)
	eq("p0.t1.0/1 inbound (up from T0 1)", in, 100, 101, 102, 103, 104)
	out, _ = logs["h3/p0"].seqs(pcap.DirOutbound)
	in, _ = logs["h3/p0"].seqs(pcap.DirInbound)
	eq("h3/p0 outbound", out, 100, 101, 102, 103, 104)
	eq("h3/p0 inbound", in, 0, 1, 2, 4)

	// Both ends of h0's cable: the same bytes; outbound stamped at the
	// start of transmission, inbound at the last bit's arrival.
	cfg := h0.Config()
	var frames int
	for _, o := range logs["h0/p0"].got {
		if o.dir != pcap.DirOutbound {
			continue
		}
		var rem uint64
		wire := o.origLen + FCSLen
		arrive := o.ts + int64(serializationTime(wire+cfg.IFGBytes, h0.Tx.Rate, &rem)) + int64(h0.Tx.Delay)
		if o.ts != int64(frames)*int64(gap) {
			t.Errorf("h0/p0 outbound frame %d stamped %d, sent at %d", frames, o.ts, int64(frames)*int64(gap))
		}
		frames++
		found := false
		for _, i := range logs["p0.t0.0/0"].got {
			if i.dir == pcap.DirInbound && bytes.Equal(i.data, o.data) {
				found = true
				if i.ts != arrive || i.origLen != o.origLen {
					t.Errorf("p0.t0.0/0 inbound at %d (%d B), want %d (%d B)", i.ts, i.origLen, arrive, o.origLen)
				}
			}
		}
		lost := bytes.Equal(o.data[offL4+UDPHeaderLen:offL4+UDPHeaderLen+4], []byte{0, 0, 0, 3})
		if found == lost {
			t.Errorf("frame sent at %d: found at the peer %v, lost %v", o.ts, found, lost)
		}
	}
	if frames != 5 {
		t.Fatalf("%d frames out of h0/p0", frames)
	}

	// Untapping stops the copies.
	h0.Tap(nil)
	n := len(logs["h0/p0"].got)
	send(loop.Now()+gap, 0, 3, 7)
	loop.Run()
	if len(logs["h0/p0"].got) != n || len(logs["h3/p0"].got) == 0 {
		t.Errorf("untapped port recorded %d more frames", len(logs["h0/p0"].got)-n)
	}
}

// A tapped port writing to a pcap writer allocates nothing per frame.
func TestTapNoAllocs(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 1, DefaultOptions(ForwardECMP))
	hs := attach(topo)
	for _, h := range hs {
		h.onRecv = func(p *Packet, _ *Port) bool { p.Release(); return true }
	}
	w, err := pcap.NewWriter(io.Discard, pcap.LinkTypeEthernet, 256)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"h0/p0", "p0.t0.0/0", "p0.t0.0/2", "p0.t1.0/1", "h3/p0"} {
		topo.Port(n).Tap(w)
	}
	spec := FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(3, 0), Payload: 4000, Stored: -1}
	one := func() {
		topo.HostPorts[0][0].Enqueue(BuildFrame(topo.Pool, spec))
		loop.Run()
	}
	for range 100 {
		one()
	}
	if a := testing.AllocsPerRun(500, one); a != 0 {
		t.Fatalf("%v allocations per frame across 5 tapped ports", a)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}
