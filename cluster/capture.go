package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
)

// CaptureFileNG is the file name of a pcapng capture in its directory.
const CaptureFileNG = "capture.pcapng"

// Capture is the packet capture of a whole run (output.pcap): the named
// ports of every cluster the run builds — one for run, collective and
// drill, one per cell or point for an experiment — tapped in both
// directions (fabric.Port.Tap) into
//
//   - pcapng: one file, <dir>/capture.pcapng, with an interface per
//     (point, port) whose if_name is the port's name and if_description
//     "point <label>", and each frame's direction;
//   - pcap: one classic file per (point, port), <dir>/<port>.pcap while
//     one cluster is attached, <dir>/<point index>-<port>.pcap (from 0,
//     in attach order) once there are several; '/', ':' and ' ' in names
//     become '_'.
//
// Timestamps are each cluster's virtual time in nanoseconds (so the points
// of an experiment overlap in time). Every frame is cut to
// output.pcapSnaplen bytes; past output.pcapMaxPackets frames in the whole
// run, frames are counted, not written. A Capture is used from one
// goroutine: the clusters it taps must run one at a time, on their loops,
// which is why a partitioned cluster is not tapped.
//
// The methods of a nil *Capture do nothing, so callers need not test for
// NewCapture's nil.
type Capture struct {
	out     config.OutputConfig
	dir     string
	snap    uint32 // 0: whole frames
	max     uint64
	written uint64 // frames written, whole run
	over    uint64 // frames not written: past max, or after a write error
	ng      *pcap.NGWriter
	ports   []*capturePort
	points  int // clusters attached
	notes   []string
	err     error // the first write error
	closed  bool
}

// capturePort is the tap of one port of one point: a fabric.FrameTap.
type capturePort struct {
	c             *Capture
	port          *fabric.Port
	name, label   string
	point         int
	iface         uint32       // pcapng interface id
	w             *pcap.Writer // pcap: its own file
	path          string       // pcap: that file
	written, over uint64
	done          bool // untapped and its file closed: its cluster has ended
}

// NewCapture returns the capture out describes, writing into dir (which
// must exist), or nil, nil when out names no port. The pcapng file is
// created now; classic files as their clusters attach. out should be
// validated (config.Validate); its format and bounds are checked again.
func NewCapture(out config.OutputConfig, dir string) (*Capture, error) {
	if len(out.Pcap) == 0 {
		return nil, nil
	}
	switch {
	case out.PcapFormat != config.PcapFormatNG && out.PcapFormat != config.PcapFormatClassic:
		return nil, fmt.Errorf("output.pcapFormat: must be %q or %q, got %q", config.PcapFormatNG, config.PcapFormatClassic, out.PcapFormat)
	case out.PcapMaxPackets < 1 || out.PcapMaxPackets > config.MaxPcapMaxPackets:
		return nil, fmt.Errorf("output.pcapMaxPackets: must be 1..%d, got %d", config.MaxPcapMaxPackets, out.PcapMaxPackets)
	case out.PcapSnaplen < 0 || out.PcapSnaplen > config.MaxPcapSnaplen:
		return nil, fmt.Errorf("output.pcapSnaplen: must be 0..%d, got %d", config.MaxPcapSnaplen, out.PcapSnaplen)
	}
	c := &Capture{out: out, dir: dir, snap: uint32(out.PcapSnaplen), max: uint64(out.PcapMaxPackets)}
	if out.PcapFormat == config.PcapFormatNG {
		f, err := os.Create(filepath.Join(dir, CaptureFileNG))
		if err != nil {
			return nil, err
		}
		if c.ng, err = pcap.NewNGWriter(f, "vcluster"); err != nil {
			f.Close()
			return nil, err
		}
	}
	return c, nil
}

// Attach taps the captured ports of cl, one point of the run labelled
// point. A port cl does not have (a cell with fewer hosts or planes) is
// left out with a note in Summary, as is a partitioned cluster. The error
// is that of creating a file.
func (c *Capture) Attach(cl *Cluster, point string) error {
	if c == nil {
		return nil
	}
	if c.closed {
		return errors.New("cluster: capture closed")
	}
	idx := c.points
	c.points++
	// A new cluster means the earlier ones have ended: untap their ports
	// and close their classic files now, so a run of many points keeps
	// only one point's files open.
	c.endPorts()
	if cl.par != nil && cl.par.workers > 1 {
		// A classic cluster runs as a one-worker partitioned run: its
		// ports share one goroutine, so only more workers are refused.
		c.notes = append(c.notes, fmt.Sprintf("point %q: not captured: a partitioned cluster runs its ports on several goroutines", point))
		return nil
	}
	if c.ng == nil && idx == 1 {
		// A second cluster: the first one's files take their point index.
		for _, p := range c.ports {
			path := filepath.Join(c.dir, c.fileName(p.point, p.name))
			if err := os.Rename(p.path, path); err != nil {
				return err
			}
			p.path = path
		}
	}
	for _, name := range c.out.Pcap {
		pt := cl.Topo.Port(name)
		if pt == nil {
			cfg := cl.Config
			cfg.Output.Pcap = []string{name}
			why := "no such port"
			if err := config.CheckCapturePorts(cfg); err != nil {
				why = strings.TrimPrefix(err.Error(), "output.pcap: ")
			}
			c.notes = append(c.notes, fmt.Sprintf("point %q: %s not captured: %s", point, name, why))
			continue
		}
		p := &capturePort{c: c, port: pt, name: name, label: point, point: idx}
		if c.ng != nil {
			desc := ""
			if point != "" {
				desc = "point " + point
			}
			id, err := c.ng.AddInterface(pcap.Interface{Name: name, Description: desc, LinkType: pcap.LinkTypeEthernet, SnapLen: c.snap})
			if err != nil {
				return err
			}
			p.iface = id
		} else {
			p.path = filepath.Join(c.dir, c.fileName(idx, name))
			f, err := os.Create(p.path)
			if err != nil {
				return err
			}
			if p.w, err = pcap.NewWriter(f, pcap.LinkTypeEthernet, c.snap); err != nil {
				f.Close()
				return err
			}
		}
		c.ports = append(c.ports, p)
		pt.Tap(p)
	}
	return nil
}

// fileName names a classic capture file: <port>.pcap while one cluster is
// attached, <point>-<port>.pcap once several are.
func (c *Capture) fileName(point int, port string) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r == ' ' {
			return '_'
		}
		return r
	}, port) + ".pcap"
	if c.points > 1 {
		name = fmt.Sprintf("%d-%s", point, name)
	}
	return name
}

// TapFrame implements fabric.FrameTap: it writes the frame unless the run
// reached its bound (or a write failed), and counts it either way.
func (p *capturePort) TapFrame(ts int64, dir pcap.Direction, frame []byte, origLen int) {
	c := p.c
	if c.written >= c.max || c.err != nil {
		p.over++
		c.over++
		return
	}
	var err error
	if c.ng != nil {
		err = c.ng.WritePacket(p.iface, ts, dir, frame, origLen)
	} else {
		err = p.w.WritePacket(ts, frame, origLen)
	}
	if err != nil {
		c.err = err
		p.over++
		c.over++
		return
	}
	p.written++
	c.written++
}

// Close untaps the ports and flushes and closes the files. It returns the
// first error met writing them.
func (c *Capture) Close() error {
	if c == nil || c.closed {
		return nil
	}
	c.closed = true
	c.endPorts()
	err := c.err
	if c.ng != nil {
		if e := c.ng.Close(); err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return nil
}

// endPorts untaps every attached port and closes its classic file; the
// first error is kept in c.err.
func (c *Capture) endPorts() {
	for _, p := range c.ports {
		if p.done {
			continue
		}
		p.done = true
		p.port.Tap(nil)
		if p.w != nil {
			if e := p.w.Close(); e != nil && c.err == nil {
				c.err = e
			}
		}
	}
}

// Written returns the frames written so far and those not written (past
// output.pcapMaxPackets, or after a write error).
func (c *Capture) Written() (written, notWritten uint64) {
	if c == nil {
		return 0, 0
	}
	return c.written, c.over
}

// Files returns the capture files, in the order they were created.
func (c *Capture) Files() []string {
	if c == nil {
		return nil
	}
	if c.ng != nil {
		return []string{filepath.Join(c.dir, CaptureFileNG)}
	}
	files := make([]string, len(c.ports))
	for i, p := range c.ports {
		files[i] = p.path
	}
	return files
}

// Summary describes the capture: its files, the frames written and not
// written, in total and per (point, port), and the notes of Attach. It is
// "" for a nil Capture.
func (c *Capture) Summary() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	snap := "whole frames"
	if c.snap != 0 {
		snap = fmt.Sprintf("snaplen %d B", c.snap)
	}
	fmt.Fprintf(&b, "capture (%s, %s): %d frames written, %d not written (output.pcapMaxPackets %d)\n",
		c.out.PcapFormat, snap, c.written, c.over, c.max)
	if c.ng != nil {
		fmt.Fprintf(&b, "  file %s\n", filepath.Join(c.dir, CaptureFileNG))
	}
	for _, p := range c.ports {
		where := fmt.Sprintf("interface %d", p.iface)
		if c.ng == nil {
			where = "file " + p.path
		}
		point := ""
		if p.label != "" {
			point = fmt.Sprintf(" (point %s)", p.label)
		}
		fmt.Fprintf(&b, "  %s%s, %s: %d written, %d not written\n", p.name, point, where, p.written, p.over)
	}
	for _, n := range c.notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
