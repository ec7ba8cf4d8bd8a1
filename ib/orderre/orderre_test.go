package orderre

import "testing"

func TestReadSignals(t *testing.T) {
	b := make([]byte, 16)
	b[0] = 0x07                            // WRITE Middle
	SetFlags(b, FlagFReTx|FlagCreate|0x80) // 0x80 (A) is not OrderRE's
	SetCopies(b, 3)
	b[4] |= 0x80 // FECN survives SetCopies
	b[9], b[10], b[11] = 0x01, 0x02, 0x03
	s := Read(b)
	if s.Kind != KindData || !s.FReTx() || s.Flags != FlagFReTx|FlagCreate || s.Copies != 3 || s.PSN != 0x010203 {
		t.Fatalf("data signal %+v", s)
	}
	SetCopies(b, 99)
	if Read(b).Copies != MaxCopies || b[4]&0x80 == 0 {
		t.Fatalf("copies clamp: %+v byte4 %#x", Read(b), b[4])
	}
	ack := make([]byte, 16)
	ack[0] = OpAck
	SetFlags(ack, FlagRegister)
	if s := Read(ack); s.Kind != KindAck || s.Flags != FlagRegister || s.Copies != 0 || s.FReTx() {
		t.Fatalf("ack signal %+v", s)
	}
	if IsFNACK(ack) {
		t.Fatal("plain ACK read as FNACK")
	}
	ack[12] = SyndromeFNACK
	if !IsFNACK(ack) {
		t.Fatal("FNACK not recognised")
	}
	for _, short := range [][]byte{nil, b[:11], {0x81, 0, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0}} {
		if s := Read(short); s.Kind != KindOther || s.Flags != 0 {
			t.Fatalf("%x read as %+v", short, s)
		}
	}
	if IsFNACK(ack[:12]) {
		t.Fatal("FNACK without AETH")
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte{0x06, 0, 0, 0, 3, 0, 0, 1, 0x60, 0, 0, 9})
	f.Add([]byte{0x11, 0, 0, 0, 0, 0, 0, 1, 0x20, 0, 0, 9, 0x70, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := Read(b)
		if s.Kind == KindOther && (s.Flags != 0 || s.Copies != 0 || s.PSN != 0) {
			t.Fatalf("other kind with fields %+v", s)
		}
		if s.Copies < 0 || s.Copies > MaxCopies || s.PSN >= 1<<24 {
			t.Fatalf("out of range %+v", s)
		}
		_ = IsFNACK(b)
	})
}
