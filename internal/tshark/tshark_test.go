package tshark

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/fabric/pcap"
)

// The frames below are built by hand with the standard library only, so the
// test checks tshark (and the pcap writer) against byte layouts written from
// the specifications, not against another part of the simulator.

var (
	macA = []byte{0x02, 0, 0, 0, 0, 0x01}
	macB = []byte{0x02, 0, 0, 0, 0, 0x02}
	ipA  = [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}
	ipB  = [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02}
	ipC  = [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0c}
	ipD  = [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0d}
)

const (
	etherIPv6      = 0x86dd
	etherMACCtrl   = 0x8808
	protoIPv6      = 41
	protoUDP       = 17
	protoICMPv6    = 58
	roceV2Port     = 4791
	ibOpRCWriteOne = 0x0a
)

func ethernet(dst, src []byte, etherType uint16, payload []byte) []byte {
	b := make([]byte, 0, 14+len(payload))
	b = append(b, dst...)
	b = append(b, src...)
	b = binary.BigEndian.AppendUint16(b, etherType)
	b = append(b, payload...)
	for len(b) < 60 { // minimum frame size without FCS
		b = append(b, 0)
	}
	return b
}

// ipv6 builds a fixed IPv6 header followed by payload. tc is the traffic
// class, flow the 20-bit flow label.
func ipv6(src, dst [16]byte, next, hopLimit uint8, tc uint8, flow uint32, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(tc)<<20|flow&0xfffff)
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = next, hopLimit
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
	return append(b, payload...)
}

// l4Checksum is the Internet checksum of an upper-layer packet with the IPv6
// pseudo-header (RFC 8200 section 8.1).
func l4Checksum(src, dst [16]byte, next uint8, l4 []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	var ph [8]byte
	binary.BigEndian.PutUint32(ph[0:], uint32(len(l4)))
	ph[7] = next
	add(ph[:])
	add(l4)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func icmpv6Echo(src, dst [16]byte, id, seq uint16, data []byte) []byte {
	b := []byte{128, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, id)
	b = binary.BigEndian.AppendUint16(b, seq)
	b = append(b, data...)
	binary.BigEndian.PutUint16(b[2:], l4Checksum(src, dst, protoICMPv6, b))
	return b
}

// rocev2WriteOnly builds Ethernet/IPv6/UDP(4791)/BTH/RETH/payload/ICRC for an
// RC RDMA WRITE Only packet.
func rocev2WriteOnly(destQP, psn uint32, va uint64, rkey uint32, payload []byte) []byte {
	const (
		tc   = 0x68 // DSCP 26, ECN 00
		flow = 0xabcde
		hop  = 64
	)
	// BTH (IBTA vol 1, 9.2): opcode, SE|M|PadCnt|TVer, P_Key, resv8a, DestQP,
	// A|resv7, PSN.
	ib := make([]byte, 12, 12+16+len(payload)+4)
	ib[0] = ibOpRCWriteOne
	ib[1] = 0x40 // MigReq=1, PadCnt=0, TVer=0
	binary.BigEndian.PutUint16(ib[2:], 0xffff)
	binary.BigEndian.PutUint32(ib[4:], destQP&0xffffff) // resv8a = 0
	binary.BigEndian.PutUint32(ib[8:], 1<<31|psn&0xffffff)
	// RETH: virtual address, R_Key, DMA length.
	ib = binary.BigEndian.AppendUint64(ib, va)
	ib = binary.BigEndian.AppendUint32(ib, rkey)
	ib = binary.BigEndian.AppendUint32(ib, uint32(len(payload)))
	ib = append(ib, payload...)

	udpLen := 8 + len(ib) + 4
	udp := make([]byte, 8, udpLen)
	binary.BigEndian.PutUint16(udp[0:], 0xc000) // source port: flow entropy
	binary.BigEndian.PutUint16(udp[2:], roceV2Port)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	udp = append(udp, ib...)
	udp = append(udp, 0, 0, 0, 0) // ICRC placeholder, filled below

	icrc := roceICRC(ipv6(ipA, ipB, protoUDP, hop, tc, flow, udp))
	copy(udp[len(udp)-4:], icrc[:])

	binary.BigEndian.PutUint16(udp[6:], l4Checksum(ipA, ipB, protoUDP, udp))
	return ethernet(macB, macA, etherIPv6, ipv6(ipA, ipB, protoUDP, hop, tc, flow, udp))
}

// roceICRC returns the RoCEv2 invariant CRC of pkt, an IPv4 or IPv6 packet
// carrying UDP/BTH/.../ICRC whose last 4 bytes are the ICRC itself (their
// value is ignored). Per IBTA Annex A17 it is the CRC-32 of 8 bytes of 0xff
// (standing in for the LRH) followed by the packet with its variant fields
// set to all ones: IPv4 TOS, TTL and header checksum, or IPv6 traffic class,
// flow label and hop limit; the UDP checksum; and the BTH resv8a byte. It is
// stored least significant byte first, like the Ethernet FCS.
func roceICRC(pkt []byte) [4]byte {
	m := append(bytes.Repeat([]byte{0xff}, 8), pkt[:len(pkt)-4]...)
	ip := m[8:]
	var ihl int
	if ip[0]>>4 == 4 {
		ihl = int(ip[0]&0xf) * 4
		ip[1] = 0xff                // TOS
		ip[8] = 0xff                // TTL
		ip[10], ip[11] = 0xff, 0xff // header checksum
	} else {
		ihl = 40
		ip[0] |= 0x0f // traffic class, high nibble
		ip[1], ip[2], ip[3] = 0xff, 0xff, 0xff
		ip[7] = 0xff // hop limit
	}
	ip[ihl+6], ip[ihl+7] = 0xff, 0xff // UDP checksum
	ip[ihl+8+4] = 0xff                // BTH resv8a
	var out [4]byte
	binary.LittleEndian.PutUint32(out[:], crc32.ChecksumIEEE(m))
	return out
}

// pfcPause builds an IEEE 802.1Qbb priority-based flow control frame
// (MAC Control opcode 0x0101) pausing the given priorities for quanta.
func pfcPause(src []byte, priorities []int, quanta uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0x0101)
	var enable uint16
	var times [8]uint16
	for _, p := range priorities {
		enable |= 1 << p
		times[p] = quanta
	}
	b = binary.BigEndian.AppendUint16(b, enable)
	for _, q := range times {
		b = binary.BigEndian.AppendUint16(b, q)
	}
	return ethernet([]byte{0x01, 0x80, 0xc2, 0, 0, 0x01}, src, etherMACCtrl, b)
}

// pause8023x builds an IEEE 802.3x PAUSE frame (MAC Control opcode 0x0001).
func pause8023x(src []byte, quanta uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0x0001)
	b = binary.BigEndian.AppendUint16(b, quanta)
	return ethernet([]byte{0x01, 0x80, 0xc2, 0, 0, 0x01}, src, etherMACCtrl, b)
}

// writePcap writes frames to a fresh Ethernet pcap file, the i-th frame at
// virtual time base+i nanoseconds, and returns the file name.
func writePcap(t *testing.T, base int64, frames ...[]byte) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "capture.pcap")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, pcap.LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames {
		if err := w.WritePacket(base+int64(i), fr, len(fr)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

func assertRows(t *testing.T, file string, got [][]string, want ...[]string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.Join(got[i], "\t") == strings.Join(want[i], "\t")
	}
	if !ok {
		t.Errorf("tshark fields = %q, want %q\n%s", got, want, Verbose(t, file))
	}
}

func TestDecodesICMPv6AndRoCEv2(t *testing.T) {
	Require(t)
	payload := make([]byte, 32)
	for i := range payload {
		payload[i] = byte(0xa0 + i)
	}
	echo := ethernet(macA, macB, etherIPv6,
		ipv6(ipB, ipA, protoICMPv6, 64, 0, 0, icmpv6Echo(ipB, ipA, 0x1234, 7, []byte("vcluster"))))
	roce := rocev2WriteOnly(0x000123, 0x000042, 0x0000_7f00_dead_0000, 0x1357, payload)
	file := writePcap(t, 1_000_000_000, echo, roce)

	// Nanosecond timestamps survive, and the ICMPv6 checksum is correct.
	rows := Fields(t, file, "icmpv6",
		"frame.time_epoch", "ipv6.src", "ipv6.dst", "icmpv6.type", "icmpv6.code",
		"icmpv6.checksum.status", "icmpv6.echo.identifier", "icmpv6.echo.sequence_number")
	assertRows(t, file, rows,
		[]string{"1.000000000", "fd00::2", "fd00::1", "128", "0", "1", "0x1234", "7"})

	// UDP port 4791 is RoCEv2 without any decode-as option.
	rows = FieldsArgs(t, file, CheckUDPChecksum, "infiniband",
		"frame.time_epoch", "udp.dstport", "udp.checksum.status",
		"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
		"infiniband.bth.p_key", "infiniband.bth.a",
		"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
		"infiniband.invariant.crc")
	// tshark 4.0 does not verify the ICRC; it shows the 4 bytes as a
	// big-endian number (TestRoCEICRCKnownAnswer checks our computation).
	icrc := binary.BigEndian.Uint32(roce[len(roce)-4:])
	assertRows(t, file, rows, []string{
		"1.000000001", "4791", "1",
		"10", "0x000123", "66",
		"65535", "1",
		"0x00007f00dead0000", "0x00001357", "32",
		fmt.Sprintf("0x%08x", icrc),
	})

	// The explicit decode-as gives the same result.
	rows = FieldsArgs(t, file, DecodeRoCEv2, "udp.port == 4791", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn")
	assertRows(t, file, rows, []string{"10", "0x000123", "66"})
}

func TestDecodesIPv6InIPv6(t *testing.T) {
	Require(t)
	inner := ipv6(ipA, ipB, protoICMPv6, 64, 0, 0, icmpv6Echo(ipA, ipB, 1, 1, []byte("inner")))
	frame := ethernet(macB, macA, etherIPv6, ipv6(ipC, ipD, protoIPv6, 64, 0, 0, inner))
	file := writePcap(t, 5, frame)
	rows := Fields(t, file, "", "ipv6.nxt", "ipv6.src", "ipv6.dst", "icmpv6.type", "icmpv6.checksum.status")
	assertRows(t, file, rows, []string{"41,58", "fd00::c,fd00::1", "fd00::d,fd00::2", "128", "1"})
}

func TestDecodesPause(t *testing.T) {
	Require(t)
	file := writePcap(t, 0, pfcPause(macA, []int{3}, 0xffff), pause8023x(macA, 0x1234))
	rows := Fields(t, file, "macc",
		"eth.type", "macc.opcode", "macc.cbfc.enbv", "macc.cbfc.enbv.c3",
		"macc.cbfc.pause_time.c3", "macc.cbfc.pause_time.c0", "macc.pause_time")
	assertRows(t, file, rows,
		[]string{"0x8808", "0x0101", "0x0008", "1", "65535", "0", ""},
		[]string{"0x8808", "0x0001", "", "", "", "", "4660"})
}

// TestRoCEICRCKnownAnswer checks roceICRC against a RoCEv2 CNP captured from
// a ConnectX-4 Lx NIC (IPv4; the masking rules are the same as for IPv6
// apart from which header fields are variant).
func TestRoCEICRCKnownAnswer(t *testing.T) {
	const capture = "" +
		"e41d2dab2bc27cfe90643b320800" + // Ethernet
		"45c2003c718c400040119161" + "0a001101" + "0a001201" + // IPv4
		"000012b700280000" + // UDP, checksum 0
		"8100ffff4000011800000000" + // BTH: CNP, DestQP 0x000118
		"00000000000000000000000000000000" + // CNP padding
		"82fd002a" // ICRC
	frame, err := hex.DecodeString(capture)
	if err != nil {
		t.Fatal(err)
	}
	ip := frame[14:]
	got := roceICRC(ip)
	if want := ip[len(ip)-4:]; !bytes.Equal(got[:], want) {
		t.Fatalf("ICRC = % x, want % x", got, want)
	}
}
