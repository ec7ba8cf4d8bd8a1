package wireshark

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/clustertest"
	"github.com/vcluster/vcluster/internal/tshark"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/sim"
)

// The tests capture frames vcluster puts on the wire, run tshark with
// mrc.lua over them and check every field the dissector shows against
// mrc's codec decoding the same bytes (mrc/wire.go), for full captures,
// trimmed packets and captures cut by a snaplen.

// pluginArgs loads the plugin and accepts the zero UDP checksum vcluster's
// RoCEv2 frames carry (endpoint's package doc).
func pluginArgs(t *testing.T) []string {
	t.Helper()
	script, err := filepath.Abs("mrc.lua")
	if err != nil {
		t.Fatal(err)
	}
	return append(tshark.Lua(script), tshark.IgnoreIPv6ZeroChecksum...)
}

// headerFields are the dissector's fields, per MRC header.
var headerFields = map[string][]string{
	"bth": {"mrc.bth.opcode", "mrc.bth.se", "mrc.bth.m", "mrc.bth.padcnt", "mrc.bth.tver", "mrc.bth.p_key",
		"mrc.bth.reserved", "mrc.bth.destqp", "mrc.bth.ackreq", "mrc.bth.rtx", "mrc.bth.ts", "mrc.bth.reserved5", "mrc.bth.psn"},
	"meth":  {"mrc.meth.rqmsn", "mrc.meth.msn"},
	"tseth": {"mrc.tseth.ts", "mrc.tseth.coarse", "mrc.tseth.reserved"},
	"reth":  {"mrc.reth.va", "mrc.reth.r_key", "mrc.reth.dmalen"},
	"imm":   {"mrc.immdt"},
	"aeth":  {"mrc.aeth.syndrome", "mrc.aeth.msn"},
	"seth": {"mrc.seth.m", "mrc.seth.p", "mrc.seth.r", "mrc.seth.reserved0", "mrc.seth.reserved1", "mrc.seth.ack_offset",
		"mrc.seth.ev", "mrc.seth.reserved8", "mrc.seth.cack_psn", "mrc.seth.mpr", "mrc.seth.reserved13",
		"mrc.seth.sack_offset", "mrc.seth.bitmap", "mrc.seth.reserved24"},
	"cc": {"mrc.ccstate.ts_echo", "mrc.ccstate.restore_cwnd", "mrc.ccstate.ooo_count", "mrc.ccstate.reserved",
		"mrc.ccstate.rcv_cwnd_pen", "mrc.ccstate.rcvd_bytes"},
	"neth": {"mrc.neth.code", "mrc.neth.r", "mrc.neth.reserved1", "mrc.neth.ts_echo", "mrc.neth.ev", "mrc.neth.reserved8", "mrc.neth.psn"},
	"peth": {"mrc.peth.ev", "mrc.peth.seq", "mrc.peth.ts"},
	"erth": {"mrc.erth.op", "mrc.erth.req_id", "mrc.erth.port_status_mask", "mrc.erth.status", "mrc.erth.reserved"},
	"eeth": {"mrc.eeth.op", "mrc.eeth.req_id", "mrc.eeth.port_status_mask", "mrc.eeth.status", "mrc.eeth.reserved"},
}

// Fields checked besides the headers' (the EV fields list the wire EV
// first, then a header's reflected EV).
var (
	evFields    = []string{"mrc.ev", "mrc.ev.plane", "mrc.ev.choice", "mrc.ev.label"}
	otherFields = []string{"mrc.payload.len", "mrc.icrc", "mrc.snaplen", "mrc.short"}
	wsFields    = []string{"frame.number", "_ws.col.Protocol", "_ws.col.Info", "_ws.malformed", "_ws.expert.severity",
		"_ws.expert.message", "infiniband.bth.opcode", "udp.srcport"}
)

func allFields() []string {
	var fs []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range headerFields {
			if !yield(k) {
				return
			}
		}
	}) {
		fs = append(fs, headerFields[k]...)
	}
	fs = append(fs, evFields...)
	fs = append(fs, otherFields...)
	return append(fs, wsFields...)
}

func u[T uint8 | uint16 | uint32 | uint64 | int16](v T) string { return fmt.Sprint(v) }

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// header is one MRC header as mrc's codec decodes it: its name, where it
// ends in the UDP payload, its fields' values and the EV it carries, if
// any.
type header struct {
	name   string
	end    int
	values []string // in headerFields[name] order
	ev     uint32
	hasEV  bool
}

// layout decodes an MRC UDP payload (b holds every header: zero-padded
// where the packet or the capture is shorter) into its headers, in wire
// order.
func layout(b []byte) ([]header, error) {
	bth, err := mrc.DecodeBTH(b)
	if err != nil {
		return nil, err
	}
	// Reserved fields are 0: the decoders reject anything else.
	hs := []header{{name: "bth", end: mrc.BTHLen, values: []string{u(bth.Opcode), bit(bth.SE), bit(bth.MigReq), u(bth.PadCnt), "0",
		u(bth.PKey), "0", u(bth.DestQP), bit(bth.AckReq), bit(bth.Rtx), bit(bth.TS), "0", u(bth.PSN)}}}
	add := func(name string, n int, vs ...string) *header {
		hs = append(hs, header{name: name, end: hs[len(hs)-1].end + n, values: vs})
		return &hs[len(hs)-1]
	}
	withEV := func(h *header, ev uint32) { h.ev, h.hasEV = ev, true }
	switch op := bth.Opcode; {
	case mrc.IsDataOpcode(op):
		var h mrc.DataHeader
		if _, err := mrc.DecodeData(b, &h); err != nil {
			return nil, err
		}
		add("meth", mrc.METHLen, u(h.METH.RQMSN), u(h.METH.MSN))
		if h.BTH.TS {
			add("tseth", mrc.TSETHLen, u(h.TSETH.TS), bit(h.TSETH.Coarse), "0")
		}
		add("reth", mrc.RETHLen, u(h.RETH.VA), u(h.RETH.RKey), u(h.RETH.DMALen))
		if mrc.HasImm(op) {
			add("imm", mrc.ImmLen, u(h.Imm))
		}
	case op == mrc.OpAck:
		_, a, err := mrc.DecodeAck(b)
		if err != nil {
			return nil, err
		}
		add("aeth", mrc.AETHLen, u(a.Syndrome), u(a.MSN))
	case op == mrc.OpSACK:
		_, s, c, err := mrc.DecodeSACK(b)
		if err != nil {
			return nil, err
		}
		withEV(add("seth", mrc.SETHLen, u(s.M), bit(s.ProbeResp), bit(s.RtxEcho), "0", "0", u(s.AckOffset), u(s.EV), "0",
			u(s.CackPSN), u(s.MPR), "0", u(s.SackOffset), u(s.Bitmap), "0"), s.EV)
		add("cc", mrc.CCStateLen, u(c.TSEcho), bit(c.RestoreCwnd), u(c.OOOCount), "0", u(c.RcvCwndPen), u(c.RcvdBytes))
	case op == mrc.OpNACK:
		_, n, err := mrc.DecodeNACK(b)
		if err != nil {
			return nil, err
		}
		withEV(add("neth", mrc.NETHLen, u(n.Code), bit(n.RtxEcho), "0", u(n.TSEcho), u(n.EV), "0", u(n.PSN)), n.EV)
	case op == mrc.OpProbe:
		_, p, err := mrc.DecodeProbe(b)
		if err != nil {
			return nil, err
		}
		withEV(add("peth", mrc.PETHLen, u(p.EV), u(p.Seq), u(p.TS)), p.EV)
	case op == mrc.OpEndpointReq || op == mrc.OpEndpointResp:
		_, resp, e, err := mrc.DecodeEndpoint(b)
		if err != nil {
			return nil, err
		}
		name := "erth"
		if resp {
			name = "eeth"
		}
		add(name, mrc.ERTHLen, u(e.Op), u(e.ReqID), u(e.PortStatusMask), u(e.Status), "0")
	default:
		return nil, fmt.Errorf("opcode %#x is not MRC's", op)
	}
	return hs, nil
}

// frame is one captured RoCEv2 frame, parsed by hand.
type frame struct {
	udp     []byte // the captured part of the UDP payload
	rep     int    // the UDP payload's length on the wire
	sport   uint16
	flow    uint32 // of the innermost IPv6 header
	trimmed bool   // DSCP TRIMMED or TRIMMED_LASTHOP
}

func parseFrame(d []byte) (frame, bool) {
	var f frame
	if len(d) < fabric.EthHeaderLen || binary.BigEndian.Uint16(d[12:]) != 0x86dd {
		return f, false
	}
	off := fabric.EthHeaderLen
	for {
		if off+fabric.IPv6HeaderLen > len(d) {
			return f, false
		}
		ip := d[off:]
		f.flow = binary.BigEndian.Uint32(ip) & 0xfffff
		dscp := (ip[0]<<4 | ip[1]>>4) >> 2
		f.trimmed = dscp == fabric.DSCPTrimmed || dscp == fabric.DSCPTrimmedLastHop
		off += fabric.IPv6HeaderLen
		if ip[6] == fabric.ProtoIPv6 {
			continue
		}
		if ip[6] != fabric.ProtoUDP || off+fabric.UDPHeaderLen > len(d) || binary.BigEndian.Uint16(d[off+2:]) != fabric.RoCEv2Port {
			return f, false
		}
		break
	}
	f.sport = binary.BigEndian.Uint16(d[off:])
	f.rep = int(binary.BigEndian.Uint16(d[off+4:])) - fabric.UDPHeaderLen
	f.udp = d[off+fabric.UDPHeaderLen:]
	if len(f.udp) > f.rep { // Ethernet padding
		f.udp = f.udp[:f.rep]
	}
	return f, true
}

// expect returns what the dissector should show for an MRC frame: each
// checked field's value ("" when absent), and the headers it decodes.
// whole is the frame's UDP payload as sent (from the capture without a
// snaplen; a trimmed packet's is only what the trim left).
func expect(f frame, whole []byte) (map[string]string, []header, error) {
	hs, err := layout(append(slices.Clone(whole), make([]byte, mrc.MaxDataHeaderLen+mrc.SACKLen)...))
	if err != nil {
		return nil, nil, err
	}
	want := map[string]string{}
	ev := endpoint.EVFromWire(f.sport, f.flow)
	evs := []uint32{uint32(ev)}
	have := len(f.udp)
	var shown []header
	complete := true
	for _, h := range hs {
		if h.end > have {
			if h.end > f.rep {
				want["mrc.short"] = "1"
			} else {
				want["mrc.snaplen"] = "1"
			}
			complete = false
			break
		}
		shown = append(shown, h)
		for i, name := range headerFields[h.name] {
			want[name] = h.values[i]
		}
		if h.hasEV {
			evs = append(evs, h.ev)
		}
	}
	want["mrc.ev"] = u(evs[0])
	for _, e := range evs {
		e := endpoint.EV(e)
		want["mrc.ev.plane"] += "," + strconv.Itoa(e.Plane())
		want["mrc.ev.choice"] += "," + strconv.Itoa(e.Choice())
		want["mrc.ev.label"] += "," + u(uint32(e)>>16)
	}
	for _, k := range evFields[1:] {
		want[k] = want[k][1:]
	}
	if complete {
		end := hs[len(hs)-1].end
		icrcAt := end
		if mrc.IsDataOpcode(f.udp[0]) {
			tail := mrc.ICRCLen
			if f.trimmed {
				tail = 0 // a trimmed packet has no ICRC
			}
			want["mrc.payload.len"] = strconv.Itoa(f.rep - end - tail)
			icrcAt = f.rep - tail
			if f.trimmed || have < f.rep {
				icrcAt = -1 // not there, or not captured: nothing to say
			}
		}
		switch {
		case icrcAt < 0:
		case icrcAt+mrc.ICRCLen <= have:
			want["mrc.icrc"] = u(binary.BigEndian.Uint32(f.udp[icrcAt:]))
		case icrcAt+mrc.ICRCLen <= f.rep:
			want["mrc.snaplen"] = "1"
		}
	}
	return want, shown, nil
}

// normalize rewrites a tshark field value (hex or decimal numbers, several
// occurrences joined by commas) as decimal numbers.
func normalize(s string) string {
	if s == "" {
		return s
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if v, err := strconv.ParseInt(p, 10, 64); err == nil && strings.HasPrefix(p, "-") {
			parts[i] = strconv.FormatInt(v, 10)
		} else if v, err := strconv.ParseUint(p, 0, 64); err == nil {
			parts[i] = strconv.FormatUint(v, 10)
		}
	}
	return strings.Join(parts, ",")
}

// captureStats counts what a checked capture held.
type captureStats struct {
	frames  int
	ops     map[uint8]int
	headers map[string]int // fully decoded headers by kind
	notes   map[string]int // mrc.snaplen / mrc.short
	evs     map[uint32]int // wire EVs of non-endpoint frames
}

func readPcap(t *testing.T, file string) (uint32, []pcap.Record) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	link, recs, err := pcap.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return link, recs
}

// checkMRC runs tshark with the plugin over file and checks every MRC frame
// against expect: every field, no malformed packet, no warning or error
// expert info (so no Lua error either), the MRC protocol column and no
// InfiniBand decode, and a UDP source port in 0xC000..0xFFFF. whole is the
// capture file was cut from with a snaplen (the frames as sent), or "".
func checkMRC(t *testing.T, file, whole string) captureStats {
	t.Helper()
	_, recs := readPcap(t, file)
	sent := recs
	if whole != "" {
		if _, sent = readPcap(t, whole); len(sent) != len(recs) {
			t.Fatalf("%s has %d frames, %s %d", file, len(recs), whole, len(sent))
		}
	}
	fields := allFields()
	args := pluginArgs(t)
	rows := tshark.FieldsArgs(t, file, args, "", fields...)
	if len(rows) != len(recs) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(recs))
	}
	st := captureStats{ops: map[uint8]int{}, headers: map[string]int{}, notes: map[string]int{}, evs: map[uint32]int{}}
	bad := 0
	for i, rec := range recs {
		fr, ok := parseFrame(rec.Data)
		if !ok {
			continue
		}
		got := map[string]string{}
		for j, name := range fields {
			got[name] = rows[i][j]
		}
		fail := func(format string, a ...any) {
			t.Helper()
			if bad++; bad == 1 {
				t.Logf("first bad frame:\n%s", tshark.VerboseArgs(t, file, args, "frame.number=="+got["frame.number"]))
			}
			if bad <= 20 {
				t.Errorf("frame %s: %s", got["frame.number"], fmt.Sprintf(format, a...))
			}
		}
		full, _ := parseFrame(sent[i].Data)
		want, shown, err := expect(fr, full.udp)
		if err != nil {
			fail("mrc's codec rejects it: %v", err)
			continue
		}
		st.frames++
		st.ops[fr.udp[0]]++
		for _, h := range shown {
			st.headers[h.name]++
		}
		for _, n := range []string{"mrc.snaplen", "mrc.short"} {
			if want[n] != "" {
				st.notes[n]++
			}
		}
		if op := fr.udp[0]; op != mrc.OpEndpointReq && op != mrc.OpEndpointResp {
			st.evs[uint32(endpoint.EVFromWire(fr.sport, fr.flow))]++
		}
		for _, name := range fields {
			if strings.HasPrefix(name, "mrc.") && normalize(got[name]) != want[name] {
				fail("%s = %q, want %q", name, got[name], want[name])
			}
		}
		if got["_ws.malformed"] != "" || got["_ws.col.Protocol"] != "MRC" || got["infiniband.bth.opcode"] != "" ||
			strings.Contains(got["_ws.col.Info"], "Unknown") {
			fail("protocol %q, info %q, malformed %q, infiniband opcode %q", got["_ws.col.Protocol"], got["_ws.col.Info"],
				got["_ws.malformed"], got["infiniband.bth.opcode"])
		}
		for _, s := range strings.Split(got["_ws.expert.severity"], ",") {
			if s == tshark.SeverityError || s == tshark.SeverityWarn {
				fail("expert info %q (severities %s)", got["_ws.expert.message"], got["_ws.expert.severity"])
				break
			}
		}
		if strings.Contains(got["_ws.expert.message"], "Lua") {
			fail("Lua error: %s", got["_ws.expert.message"])
		}
		if sp, _ := strconv.Atoi(got["udp.srcport"]); sp != int(fr.sport) || sp < endpoint.EVPortBase {
			fail("UDP source port %s (frame bytes %d): want the EV's low 16 bits, ≥ 0xC000", got["udp.srcport"], fr.sport)
		}
	}
	if st.frames == 0 {
		t.Fatalf("%s holds no MRC frame", file)
	}
	return st
}

// snapCopy rewrites a capture with a snaplen, as tcpdump -s would have
// captured it.
func snapCopy(t *testing.T, file string, snap uint32) string {
	t.Helper()
	link, recs := readPcap(t, file)
	out := strings.TrimSuffix(file, ".pcap") + fmt.Sprintf("-snap%d.pcap", snap)
	w, closeFn := newWriter(t, out, link, snap)
	for _, r := range recs {
		if err := w.WritePacket(r.TS, r.Data, r.OrigLen); err != nil {
			t.Fatal(err)
		}
	}
	closeFn()
	return out
}

func newWriter(t *testing.T, file string, link, snap uint32) (*pcap.Writer, func()) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, link, snap)
	if err != nil {
		t.Fatal(err)
	}
	return w, func() { // closes f too
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func newCluster(t *testing.T, sets ...string) *cluster.Cluster {
	t.Helper()
	return clustertest.New(t, append([]string{"fabric.preset=C", "fabric.hosts=16"}, sets...)...)
}

// frameWriter starts a capture of hand-built frames: the host-0 NIC of an
// ECMP MRC cluster to build them with, and a pcap writer to a temporary
// file.
func frameWriter(t *testing.T, name string) (*endpoint.NIC, string, *pcap.Writer, func()) {
	t.Helper()
	tshark.Require(t)
	c := newCluster(t, "transport.kind=mrc", "fabric.forwarding=ecmp")
	file := filepath.Join(t.TempDir(), name)
	w, closeFn := newWriter(t, file, pcap.LinkTypeEthernet, 0)
	return c.Hosts[0].NIC, file, w, closeFn
}

// writeRDMA builds a frame with the NIC's own AllocRDMA (Ethernet, IPv6,
// UDP with the EV's port and flow label), with b as its UDP payload (the
// first h.Stored bytes of h.PayloadLen), and writes its first
// RDMAHeaderLen+captured bytes to w.
func writeRDMA(t *testing.T, w *pcap.Writer, nic *endpoint.NIC, h endpoint.RDMAHeader, b []byte, ts int64, captured int) {
	t.Helper()
	h.DstHost, h.Stored = 1, len(b)
	p, payload, err := nic.AllocRDMA(h)
	if err != nil {
		t.Fatal(err)
	}
	copy(payload, b)
	if err := w.WritePacket(ts, p.Data[:nic.RDMAHeaderLen()+captured], nic.RDMAHeaderLen()+h.PayloadLen); err != nil {
		t.Fatal(err)
	}
	p.Release()
}

// TestDissectorEveryHeader writes one frame per MRC opcode and header
// variant, with random field values, through the NIC's own frame builder
// (writeRDMA), and checks that tshark decodes every field of every header
// as mrc's codec does — also with the capture cut at 96 and 64 bytes.
func TestDissectorEveryHeader(t *testing.T) {
	nic, file, w, closeFn := frameWriter(t, "headers.pcap")
	rng := rand.New(rand.NewPCG(15, 4791))
	buf := make([]byte, mrc.MaxDataHeaderLen+512)
	var sent []uint32 // the EV of each frame
	emit := func(b []byte, wireLen int, ev endpoint.EV, tc uint8) {
		t.Helper()
		writeRDMA(t, w, nic, endpoint.RDMAHeader{EV: ev, TrafficClass: tc, PayloadLen: wireLen}, b, int64(len(sent))*1000, len(b))
		sent = append(sent, uint32(ev))
	}
	randEV := func() endpoint.EV {
		return endpoint.MakeEV(rng.IntN(nic.Planes()), rng.IntN(endpoint.MaxPathChoices), uint16(rng.Uint32()))
	}
	randBTH := func() mrc.BTH {
		return mrc.BTH{SE: rng.IntN(2) == 1, MigReq: rng.IntN(2) == 1, PadCnt: uint8(rng.IntN(4)), PKey: uint16(rng.Uint32()),
			DestQP: rng.Uint32() & 0xffffff, AckReq: rng.IntN(2) == 1, Rtx: rng.IntN(2) == 1, PSN: rng.Uint32() & 0xffffff}
	}
	const dataTC = fabric.DSCPTrimmable<<2 | fabric.ECNECT0
	// Data: every opcode, with and without TSETH, a stored payload (then
	// the ICRC) and an elided one (the capture ends with the headers).
	for op := mrc.OpWriteFirst; op <= mrc.OpWriteOnlyImm; op++ {
		for _, ts := range []bool{true, false} {
			for _, elided := range []bool{false, true} {
				h := mrc.DataHeader{BTH: randBTH(), METH: mrc.METH{RQMSN: uint16(rng.Uint32()), MSN: uint16(rng.Uint32())},
					TSETH: mrc.TSETH{TS: uint16(rng.Uint32()), Coarse: rng.IntN(2) == 1},
					RETH:  mrc.RETH{VA: rng.Uint64(), RKey: rng.Uint32(), DMALen: rng.Uint32()}, Imm: rng.Uint32()}
				h.BTH.Opcode, h.BTH.TS = op, ts
				if !ts {
					h.TSETH = mrc.TSETH{}
				}
				n, err := h.Encode(buf)
				if err != nil {
					t.Fatal(err)
				}
				plen := 1 + rng.IntN(300)
				for i := range plen {
					buf[n+i] = byte(rng.Uint32())
				}
				binary.BigEndian.PutUint32(buf[n+plen:], 0) // ICRC placeholder
				stored := n + plen + mrc.ICRCLen
				if elided {
					stored = n
				}
				emit(buf[:stored], n+plen+mrc.ICRCLen, randEV(), dataTC)
			}
		}
	}
	ctl := func(n int, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	const ctlTC = fabric.DSCPControl << 2
	for _, syn := range []uint8{mrc.AckSyndrome, mrc.NakRemoteAccessError, mrc.NakRemoteOpError} {
		b := ctl(mrc.EncodeAck(buf, randBTH(), mrc.AETH{Syndrome: syn, MSN: rng.Uint32() & 0xffffff}))
		emit(b, len(b), randEV(), ctlTC)
	}
	for m := mrc.PathNone; m <= mrc.PathAlwaysSkip; m++ {
		ev := randEV()
		s := mrc.SETH{M: m, ProbeResp: rng.IntN(2) == 1, RtxEcho: rng.IntN(2) == 1, AckOffset: int16(rng.IntN(200) - 100),
			EV: uint32(ev), CackPSN: rng.Uint32() & 0xffffff, MPR: uint8(rng.Uint32()), SackOffset: uint16(rng.Uint32()), Bitmap: rng.Uint64()}
		cc := mrc.CCState{TSEcho: uint16(rng.Uint32()), RestoreCwnd: rng.IntN(2) == 1, OOOCount: uint16(rng.IntN(0x8000)),
			RcvCwndPen: uint8(rng.IntN(128)), RcvdBytes: rng.Uint32() & 0xffffff}
		b := ctl(mrc.EncodeSACK(buf, randBTH(), &s, &cc))
		emit(b, len(b), ev, ctlTC)
	}
	for _, code := range []uint8{mrc.NackTrimmed, mrc.NackTrimmedLastHop, mrc.NackNoBitmap, mrc.NackNoPktBuffer,
		mrc.NackNoResource, mrc.NackPSNOutOfWindow, mrc.NackUnexpEvent} {
		ev := randEV()
		b := ctl(mrc.EncodeNACK(buf, randBTH(), &mrc.NETH{Code: code, RtxEcho: rng.IntN(2) == 1, TSEcho: uint16(rng.Uint32()),
			EV: uint32(ev), PSN: rng.Uint32() & 0xffffff}))
		emit(b, len(b), ev, ctlTC)
	}
	ev := randEV()
	b := ctl(mrc.EncodeProbe(buf, randBTH(), mrc.PETH{EV: uint32(ev), Seq: uint16(rng.Uint32()), TS: uint16(rng.Uint32())}))
	emit(b, len(b), ev, ctlTC)
	for _, resp := range []bool{false, true} {
		for _, op := range []uint16{mrc.EndpointPortStatus, mrc.EndpointEVProbe} {
			e := mrc.EndpointHeader{Op: op, ReqID: uint16(rng.Uint32()), PortStatusMask: rng.Uint32()}
			if resp {
				e.Status = uint8(rng.Uint32())
			}
			b := ctl(mrc.EncodeEndpoint(buf, randBTH(), resp, e))
			emit(b, len(b), randEV(), ctlTC)
		}
	}
	closeFn()

	st := checkMRC(t, file, "")
	if st.frames != len(sent) {
		t.Fatalf("checked %d MRC frames, wrote %d", st.frames, len(sent))
	}
	for _, op := range []uint8{mrc.OpWriteFirst, mrc.OpWriteMiddle, mrc.OpWriteLast, mrc.OpWriteLastImm, mrc.OpWriteOnly,
		mrc.OpWriteOnlyImm, mrc.OpAck, mrc.OpEndpointReq, mrc.OpEndpointResp, mrc.OpSACK, mrc.OpNACK, mrc.OpProbe} {
		if st.ops[op] == 0 {
			t.Errorf("no frame with opcode %#x", op)
		}
	}
	for k := range headerFields {
		if st.headers[k] == 0 {
			t.Errorf("no %s decoded", k)
		}
	}
	for ev := range st.evs {
		if !slices.Contains(sent, ev) {
			t.Errorf("wire EV %#x was not sent", ev)
		}
	}
	// Cut at 96 bytes a data frame keeps BTH, METH and TSETH, at 64 two
	// bytes of its BTH.
	for _, snap := range []uint32{96, 64} {
		st := checkMRC(t, snapCopy(t, file, snap), file)
		t.Logf("snaplen %d: %d frames, %d cut inside the headers, %v", snap, st.frames, st.notes["mrc.snaplen"], st.headers)
		if st.notes["mrc.snaplen"] == 0 {
			t.Errorf("snaplen %d: no frame cut inside its headers", snap)
		}
	}
}

// TestDissectorMRCTransfer captures every port of a receiving NIC during a
// 4:1 incast with trimming, 1% loss, a cut fabric link (its EVs go
// ASSUMED_BAD and are probed) and one of the receiver's links going down
// (a Port Status Update), and checks every frame: data, SACKs, NACKs,
// Transport ACKs, probes and the endpoint request.
func TestDissectorMRCTransfer(t *testing.T) {
	tshark.Require(t)
	c := newCluster(t, "transport.kind=mrc", "fabric.queue.bufferBytes=40000", "fabric.queue.ecn.kminBytes=10000", "fabric.queue.ecn.kmaxBytes=30000", "fabric.queue.ecn.pmax=0.2")
	dir := t.TempDir()
	if d := os.Getenv("VCLUSTER_WIRESHARK_DIR"); d != "" {
		dir = d // keep the capture: a sample to open in Wireshark
	}
	file := filepath.Join(dir, "mrc.pcap")
	w, closeFn := newWriter(t, file, pcap.LinkTypeEthernet, 0)
	nic := c.Hosts[0].NIC
	for p := range nic.Planes() {
		nic.Capture(p, w)
	}
	for _, l := range c.Topo.Links {
		l.Loss = fabric.NewBernoulli(0.01, c.Config.Seed, l.Name)
	}
	var trs []*cluster.Transfer
	var qps []*mrc.QP
	for _, s := range []struct {
		host int
		n    uint64
	}{{4, 24 << 20}, {8, 2 << 20}, {12, 2 << 20}, {5, 2 << 20}} {
		tr, p := clustertest.Transfer(t, c, s.host, 0, s.n, 1<<20)
		trs, qps = append(trs, tr), append(qps, p.A.T.(*mrc.QP))
	}
	// Host 4's uplink to T1 2 in plane 1 is cut for 100 µs: its EVs on
	// that path go ASSUMED_BAD and are probed 500 µs later.
	up := c.Topo.Switch("p1.t0.1").Ports[4+2]
	setUp := func(p *fabric.Port, on bool) { p.Tx.SetUp(on); p.Peer.Tx.SetUp(on) }
	c.Loop.At(20*sim.Microsecond, func() { setUp(up, false) })
	c.Loop.At(120*sim.Microsecond, func() { setUp(up, true) })
	// The receiver's plane-0 link goes down: it tells its peers.
	c.Loop.At(300*sim.Microsecond, func() { setUp(c.Topo.HostPorts[0][0], false) })
	c.Loop.RunWhile(func() bool {
		for _, tr := range trs {
			if !tr.Done() {
				return c.Loop.Now() < 20*sim.Millisecond
			}
		}
		return false
	})
	closeFn()
	for i, tr := range trs {
		if !tr.Done() || len(tr.Errors) > 0 {
			t.Fatalf("transfer %d: done %v, errors %v", i, tr.Done(), tr.Errors)
		}
	}

	st := checkMRC(t, file, "")
	t.Logf("%d MRC frames: opcodes %v, headers %v, notes %v", st.frames, st.ops, st.headers, st.notes)
	for _, k := range []string{"bth", "meth", "tseth", "reth", "imm", "aeth", "seth", "cc", "neth", "peth", "erth"} {
		if st.headers[k] == 0 {
			t.Errorf("no %s on the wire", k)
		}
	}
	if st.notes["mrc.short"] == 0 {
		t.Error("no trimmed packet on the wire")
	}
	// Data carries one of its QP's EVs; SACKs, NACKs, ACKs and probes
	// travel on the EV they reflect, one of the requester's.
	var pool []uint32
	for _, q := range qps {
		for _, e := range q.EVStates() {
			pool = append(pool, e.EV)
		}
	}
	for ev, n := range st.evs {
		if !slices.Contains(pool, ev) {
			t.Errorf("%d frames on EV %#x, not one of the QPs'", n, ev)
		}
	}
	for _, snap := range []uint32{256, 128} {
		st := checkMRC(t, snapCopy(t, file, snap), file)
		t.Logf("snaplen %d: %d frames, notes %v", snap, st.frames, st.notes)
	}
}

// TestDissectorKeepsRoCE: with the plugin loaded, a RoCE capture (data,
// ACKs, NAKs) decodes exactly as without it — as InfiniBand, no MRC field,
// nothing malformed.
func TestDissectorKeepsRoCE(t *testing.T) {
	tshark.Require(t)
	c := newCluster(t, "transport.kind=roce", "fabric.forwarding=ecmp")
	file := filepath.Join(t.TempDir(), "roce.pcap")
	w, closeFn := newWriter(t, file, pcap.LinkTypeEthernet, 0)
	c.Topo.HostPorts[0][0].Tap(w)
	c.Topo.HostPorts[1][0].Tx.Loss = fabric.NewBernoulli(0.01, 2, "wireshark")
	tr, _ := clustertest.Transfer(t, c, 1, 0, 2<<20, 1<<20)
	c.Loop.RunWhile(func() bool { return !tr.Done() })
	closeFn()

	ib := []string{"frame.number", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.aeth.syndrome",
		"infiniband.reth.va", "infiniband.invariant.crc", "_ws.col.Protocol", "_ws.col.Info", "_ws.malformed", "_ws.expert.severity"}
	plain := tshark.FieldsArgs(t, file, tshark.IgnoreIPv6ZeroChecksum, "udp.port == 4791", ib...)
	with := tshark.FieldsArgs(t, file, pluginArgs(t), "udp.port == 4791", append(slices.Clone(ib), "mrc.bth.opcode")...)
	if len(plain) == 0 || len(with) != len(plain) {
		t.Fatalf("%d RoCE frames without the plugin, %d with it", len(plain), len(with))
	}
	ops := map[string]int{}
	for i := range plain {
		if got := with[i][:len(ib)]; !slices.Equal(got, plain[i]) {
			t.Fatalf("frame %s decodes as %q with the plugin, %q without", plain[i][0], got, plain[i])
		}
		r := with[i]
		if r[1] == "" || r[len(ib)] != "" || r[9] != "" || slices.Contains(strings.Split(r[10], ","), tshark.SeverityError) {
			t.Fatalf("frame %s: opcode %q, mrc opcode %q, malformed %q, severities %q", r[0], r[1], r[len(ib)], r[9], r[10])
		}
		ops[r[1]]++
	}
	t.Logf("%d RoCE frames, opcodes %v", len(plain), ops)
	// Data (WRITE ...), ACK/NAK (17) must all be there.
	if ops["17"] == 0 || len(ops) < 3 {
		t.Errorf("opcodes %v: want data and ACKs", ops)
	}
}

// TestDissectorFlagsBadFrames: what mrc's codec rejects the dissector
// still decodes, with a warning and nothing malformed: a reserved bit set,
// an opcode of the MRC range MRC does not define, a control packet of the
// wrong length.
func TestDissectorFlagsBadFrames(t *testing.T) {
	nic, file, w, closeFn := frameWriter(t, "bad.pcap")
	buf := make([]byte, 64)
	nack := func() []byte {
		n, err := mrc.EncodeNACK(buf, mrc.BTH{PKey: mrc.DefaultPKey, DestQP: 0x100, PSN: 9}, &mrc.NETH{Code: mrc.NackTrimmed, PSN: 9})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(buf[:n])
	}
	reserved := nack()
	reserved[mrc.BTHLen+8] = 1 // NETH byte 8
	unknown := nack()
	unknown[0] = 0xCC
	long := append(nack(), 0, 0, 0, 0)
	frames := []struct {
		b      []byte
		expert string
	}{{reserved, "mrc.reserved"}, {unknown, "mrc.unknown_opcode"}, {long, "mrc.length"}}
	for i, f := range frames {
		if _, _, err := mrc.DecodeNACK(f.b); err == nil && i < 2 {
			t.Fatalf("frame %d: mrc's codec accepts it", i)
		}
		writeRDMA(t, w, nic, endpoint.RDMAHeader{EV: endpoint.MakeEV(1, 2, 3), PayloadLen: len(f.b)}, f.b, int64(i), len(f.b))
	}
	closeFn()
	names := []string{"mrc.reserved", "mrc.unknown_opcode", "mrc.length", "mrc.bth.psn", "_ws.malformed", "_ws.expert.severity", "_ws.col.Protocol"}
	rows := tshark.FieldsArgs(t, file, pluginArgs(t), "", names...)
	if len(rows) != len(frames) {
		t.Fatalf("%d rows for %d frames", len(rows), len(frames))
	}
	for i, r := range rows {
		for j, n := range names[:3] {
			if (r[j] != "") != (n == frames[i].expert) {
				t.Errorf("frame %d: %s = %q, want it only for %s", i, n, r[j], frames[i].expert)
			}
		}
		if r[3] != "9" || r[4] != "" || r[6] != "MRC" || slices.Contains(strings.Split(r[5], ","), tshark.SeverityError) {
			t.Errorf("frame %d: PSN %q, malformed %q, severities %q, protocol %q", i, r[3], r[4], r[5], r[6])
		}
	}
}

// TestDissectorRandomBytes: random UDP payloads behind MRC opcodes, of
// every length up to a SACK's and a little more, trimmed or not, captured
// in part, never make the dissector fail (no Lua error, nothing malformed,
// no error expert info); a frame whose capture ends before the opcode is
// left to UDP.
func TestDissectorRandomBytes(t *testing.T) {
	nic, file, w, closeFn := frameWriter(t, "random.pcap")
	rng := rand.New(rand.NewPCG(6, 7))
	const n = 600
	var opcodeSeen []bool // the capture holds the opcode byte
	for i := range n {
		b := make([]byte, 1+rng.IntN(mrc.SACKLen+8))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		b[0] = mrc.OpWriteFirst + uint8(rng.IntN(int(mrc.OpProbe-mrc.OpWriteFirst)+1))
		tc := uint8(fabric.DSCPTrimmable << 2)
		if rng.IntN(2) == 0 {
			tc = fabric.DSCPTrimmed << 2
		}
		captured := rng.IntN(len(b) + 1)
		writeRDMA(t, w, nic, endpoint.RDMAHeader{EV: endpoint.MakeEV(0, i, 1), TrafficClass: tc, PayloadLen: len(b)}, b, int64(i), captured)
		opcodeSeen = append(opcodeSeen, captured > 0)
	}
	closeFn()
	rows := tshark.FieldsArgs(t, file, pluginArgs(t), "", "frame.number", "_ws.col.Protocol", "_ws.malformed", "_ws.expert.severity", "_ws.expert.message")
	if len(rows) != n {
		t.Fatalf("%d rows for %d frames", len(rows), n)
	}
	for i, r := range rows {
		if (r[1] == "MRC") != opcodeSeen[i] || r[2] != "" || slices.Contains(strings.Split(r[3], ","), tshark.SeverityError) || strings.Contains(r[4], "Lua") {
			t.Errorf("frame %s: protocol %q, malformed %q, severities %q, messages %q", r[0], r[1], r[2], r[3], r[4])
		}
	}
}
