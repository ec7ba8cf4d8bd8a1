package pathquality

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
)

// TestUpdatesPcap: every UPDATE sent is a frame with a valid IPv6/TCP
// framing (checksum, lengths, consecutive sequence numbers per session)
// whose payload decodes; tshark, where installed, dissects it as BGP
// with the link bandwidth community.
func TestUpdatesPcap(t *testing.T) {
	d := runDegrade(t, scaled)
	var b bytes.Buffer
	if err := d.cp.WriteUpdatesPcap(&b); err != nil {
		t.Fatal(err)
	}
	raw := bytes.Clone(b.Bytes())
	lt, recs, err := pcap.ReadAll(&b)
	if err != nil {
		t.Fatal(err)
	}
	if lt != pcap.LinkTypeEthernet || uint64(len(recs)) != d.cp.Stats().UpdatesSent {
		t.Fatalf("link type %d, %d frames for %d updates", lt, len(recs), d.cp.Stats().UpdatesSent)
	}
	next := map[string]uint32{}
	const l4 = fabric.EthHeaderLen + fabric.IPv6HeaderLen
	for i, r := range recs {
		f := r.Data
		if binary.BigEndian.Uint16(f[12:]) != fabric.EtherTypeIPv6 || f[fabric.EthHeaderLen+6] != protoTCP ||
			int(binary.BigEndian.Uint16(f[fabric.EthHeaderLen+4:])) != len(f)-l4 {
			t.Fatalf("frame %d: bad IPv6 header % x", i, f[:l4])
		}
		var src, dst [16]byte
		copy(src[:], f[fabric.EthHeaderLen+8:])
		copy(dst[:], f[fabric.EthHeaderLen+24:])
		seg := bytes.Clone(f[l4:])
		sum := binary.BigEndian.Uint16(seg[16:])
		seg[16], seg[17] = 0, 0
		if want := tcpChecksum(src, dst, seg); sum != want || sum == 0 {
			t.Fatalf("frame %d: TCP checksum %#x, want %#x", i, sum, want)
		}
		if binary.BigEndian.Uint16(seg[2:]) != bgpPort {
			t.Fatalf("frame %d: destination port %d", i, binary.BigEndian.Uint16(seg[2:]))
		}
		key := string(src[:]) + string(dst[:])
		if s := binary.BigEndian.Uint32(seg[4:]); next[key] != 0 && s != next[key] {
			t.Fatalf("frame %d: sequence %d, want %d", i, s, next[key])
		}
		msg := seg[tcpHdrLen:]
		next[key] = binary.BigEndian.Uint32(seg[4:]) + uint32(len(msg))
		if _, err := DecodeUpdate(msg); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if _, ok := tshark.Path(); !ok {
		t.Log(tshark.SkipMessage)
		return
	}
	file := filepath.Join(t.TempDir(), UpdatesPcapFile)
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rows := tshark.FieldsArgs(t, file, []string{"-o", "tcp.check_checksum:TRUE"}, "bgp.type == 2",
		"tcp.checksum.status", "bgp.update.path_attribute.mp_reach_nlri.afi")
	if len(rows) != len(recs) {
		t.Fatalf("tshark sees %d BGP UPDATEs of %d frames", len(rows), len(recs))
	}
	for i, r := range rows {
		if r[0] != "1" || r[1] != "2" {
			t.Fatalf("frame %d: tshark's TCP checksum status %q (1: good), AFI %q", i, r[0], r[1])
		}
	}
	if v := tshark.Verbose(t, file); !strings.Contains(v, "Link Bandwidth: ASN 23456") {
		t.Fatalf("tshark does not show the link bandwidth community:\n%.3000s", v)
	}
}
