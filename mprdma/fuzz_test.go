package mprdma

import (
	"testing"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// FuzzResponderReceive feeds a responder a stream of packets decoded as
// the QP decodes them (roce.Decode, a RETH on every WRITE), with timer
// ticks between them, and checks after every input that it did not panic,
// that its invariants hold, and that what it sends obeys the rules: every
// control packet decodes; ePSN, rcv_oo_h and the scan pointers never
// move back; a hole is
// FNACKed at most once; a NAK for the same PSN repeats only an RTO later.
//
// The stream is records. A record whose first byte has bit 7 set is raw:
// the next (byte & 0x7f) bytes are a packet as it came off the wire,
// whatever they hold. Otherwise it is a well-formed WRITE built from four
// bytes: [op (bits 0..2), bad key (bit 3), FReTx (bit 4), CE (bit 5),
// tick (bit 6)] [PSN − ePSN + 16] [payload words] [time step].
func FuzzResponderReceive(f *testing.F) {
	f.Add(uint8(2), []byte{0, 16, 64, 1, 0, 18, 64, 1, 0, 17, 64, 1})
	f.Add(uint8(2), []byte{0, 16, 64, 1, 0, 30, 64, 1, 0, 31, 64, 1, 0, 32, 64, 1, 0x40, 40, 64, 200, 0x10, 16, 64, 1})
	f.Add(uint8(0), []byte{0, 16, 64, 1, 0, 100, 64, 1, 0, 101, 64, 1, 0x40, 20, 64, 255})
	f.Add(uint8(1), []byte{1, 16, 64, 1, 2, 17, 64, 1, 5, 18, 10, 1, 8, 19, 64, 1})
	f.Add(uint8(2), []byte{0x80 | 12, 0x11, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 5})
	f.Add(uint8(1), []byte{0x80 | 40, 0x0a, 0, 0xff, 0xff, 0, 0, 0x01, 0x23, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4, 1, 2, 3, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, scheme uint8, stream []byte) {
		cfg := respConfig(Scheme(scheme % 3))
		cfg.BitmapEntries, cfg.RTO, cfg.RepairTimeout, cfg.BaseRTT = 32, 500, 300, 100
		h := newRespHarness(t, cfg, 0xFFFFF0) // the PSN wraps within the first 16
		ops := []uint8{roce.OpWriteOnly, roce.OpWriteFirst, roce.OpWriteMiddle, roce.OpWriteLast, roce.OpWriteLastImm, roce.OpWriteOnlyImm, roce.OpWriteOnly, roce.OpAck}
		now := int64(0)
		fnacked := map[uint32]bool{}
		nakAt := map[uint32]int64{}
		var ePSN, hi, scan, tscan uint64
		after := func() {
			if err := h.r.check(); err != nil {
				t.Fatal(err)
			}
			// The pointers only move forward: detection is O(1) amortized.
			if h.r.ePSN < ePSN || h.r.hi < hi || h.r.scan < scan || h.r.tscan < tscan {
				t.Fatalf("ePSN %d→%d, rcv_oo_h+1 %d→%d, scan %d→%d, tscan %d→%d", ePSN, h.r.ePSN, hi, h.r.hi, scan, h.r.scan, tscan, h.r.tscan)
			}
			ePSN, hi, scan, tscan = h.r.ePSN, h.r.hi, h.r.scan, h.r.tscan
			for _, c := range h.drain(now) {
				switch c.kind() {
				case "FNACK":
					if fnacked[c.psn] {
						t.Fatalf("PSN %d FNACKed twice", c.psn)
					}
					fnacked[c.psn] = true
				case "NAK":
					if at, ok := nakAt[c.psn]; ok && now-at < cfg.RTO {
						t.Fatalf("NAK for %d at %d and %d", c.psn, at, now)
					}
					nakAt[c.psn] = now
				}
			}
			h.r.pollCompletions(nil)
			h.r.pollRepairs(nil)
		}
		for len(stream) > 0 {
			b0 := stream[0]
			stream = stream[1:]
			if b0&0x80 != 0 {
				n := min(int(b0&0x7f), len(stream))
				pkt := stream[:n]
				stream = stream[n:]
				var p roce.Packet
				if p.Decode(pkt, len(pkt), true) != nil || !roce.IsWrite(p.Opcode) {
					continue
				}
				rx := verbs.Rx{Data: pkt, WireLen: len(pkt)}
				h.r.receive(now, &rx, &p)
				after()
				continue
			}
			if len(stream) < 3 {
				return
			}
			rec := stream[:3]
			stream = stream[3:]
			now += int64(rec[2])
			if b0&0x40 != 0 {
				h.r.tick(now)
				if dl, ok := h.r.deadline(); ok && dl <= now {
					t.Fatalf("deadline %d still due after a tick at %d", dl, now)
				}
				after()
			}
			op := ops[b0&7]
			if op == roce.OpAck {
				continue
			}
			psn := h.r.psnOf(h.r.ePSN+uint64(rec[0])) - 16
			d := respData{psn: psn & ib.PSNMask, op: op, ce: b0&0x20 != 0, path: uint16(rec[0] % 5)}
			if b0&0x08 != 0 {
				d.key = 77
			}
			if b0&0x10 != 0 {
				d.flags = orderre.FlagFReTx
			}
			n := int(rec[1]) * 4
			if op == roce.OpWriteFirst || op == roce.OpWriteMiddle {
				n = respPMTU
			}
			d.payload = respPattern(psn, min(n, respPMTU))
			s, w := h.encode(d)
			rx := verbs.Rx{Data: h.buf[:s], WireLen: w, CE: d.ce, DstPath: d.path}
			var p roce.Packet
			if err := p.Decode(rx.Data, w, true); err != nil {
				t.Fatalf("a well-formed packet did not decode: %v", err)
			}
			h.r.receive(now, &rx, &p)
			after()
		}
	})
}
