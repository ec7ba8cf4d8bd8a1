package pathquality

import (
	"encoding/binary"
	"io"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/sim"
)

// UpdatesPcapFile is the run directory's capture of the UPDATEs sent.
const UpdatesPcapFile = "pathquality_updates.pcap"

// sentUpdate is one UPDATE as sent: when, on which port of which switch.
type sentUpdate struct {
	at   sim.Time
	from *switchCP
	port int32
	msg  []byte // shared by the neighbours of one advertisement
}

// BGP's TCP port and the framing's sizes.
const (
	bgpPort     = 179
	tcpHdrLen   = 20
	protoTCP    = 6
	tcpPSHACK   = 0x18
	tcpWindow   = 65535
	bgpHopLimit = 255 // GTSM (RFC 5082): single-hop sessions send 255
)

// WriteUpdatesPcap writes every UPDATE sent as a frame on the cable it
// crossed (Ethernet / IPv6 between the switches' uSID locators / TCP from
// an ephemeral port to 179, correct checksums), so that tshark decodes it
// as BGP with its link bandwidth community. The TCP stream of each
// directed session has consecutive sequence numbers from 1; no handshake
// is written (the sessions are up before the capture starts).
func (cp *ControlPlane) WriteUpdatesPcap(w io.Writer) error {
	pw, err := pcap.NewWriter(w, pcap.LinkTypeEthernet, 65535)
	if err != nil {
		return err
	}
	seq := make([][]uint32, len(cp.sw))
	for i, sc := range cp.sw {
		seq[i] = make([]uint32, len(sc.ports))
	}
	var f []byte
	for _, u := range cp.sent {
		src := &u.from.ports[u.port]
		s := &seq[u.from.idx][u.port]
		f = bgpFrame(f[:0], u.from, src, *s+1, u.msg)
		*s += uint32(len(u.msg))
		if err := pw.WritePacket(int64(u.at), f, len(f)); err != nil {
			return err
		}
	}
	return pw.Flush()
}

// bgpFrame appends the frame carrying msg from sc's port src to its peer
// switch, TCP sequence number seq.
func bgpFrame(b []byte, sc *switchCP, src *portCP, seq uint32, msg []byte) []byte {
	peer := src.peer
	dstMAC, srcMAC := src.p.Peer.MAC, src.p.MAC
	b = append(b, dstMAC[:]...)
	b = append(b, srcMAC[:]...)
	b = binary.BigEndian.AppendUint16(b, fabric.EtherTypeIPv6)
	ip := len(b)
	b = append(b, make([]byte, fabric.IPv6HeaderLen)...)
	fabric.PutIPv6(b[ip:], 0xc0, 0, tcpHdrLen+len(msg), protoTCP, sc.addr, peer.addr) // DSCP CS6: network control
	b[ip+7] = bgpHopLimit
	tcp := len(b)
	b = binary.BigEndian.AppendUint16(b, uint16(49152+sc.idx%16384))
	b = binary.BigEndian.AppendUint16(b, bgpPort)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint32(b, 1) // ack: nothing came back
	b = append(b, tcpHdrLen/4<<4, tcpPSHACK)
	b = binary.BigEndian.AppendUint16(b, tcpWindow)
	b = append(b, 0, 0, 0, 0) // checksum, urgent pointer
	b = append(b, msg...)
	binary.BigEndian.PutUint16(b[tcp+16:], tcpChecksum(sc.addr, peer.addr, b[tcp:]))
	return b
}

// tcpChecksum is the TCP checksum over IPv6 (RFC 8200 §8.1 pseudo-header)
// of seg, whose checksum field is zero: gVisor's, as the endpoint's UDP
// checksum is.
func tcpChecksum(src, dst [16]byte, seg []byte) uint16 {
	c := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom16(src), tcpip.AddrFrom16(dst), uint16(len(seg)))
	return ^checksum.Checksum(seg, c)
}
