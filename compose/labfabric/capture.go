package labfabric

import (
	"fmt"
	"net/http"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
)

// captureQueue is the frames a capture client may have in flight: a
// client slower than the port drops (and counts) the rest.
const captureQueue = 1024

type capFrame struct {
	ts      int64
	dir     pcap.Direction
	buf     []byte
	n, orig int
}

// captureClient is one GET /v1/capture stream. The loop copies frames
// into its buffers (made on demand, at most captureQueue) and hands them
// over on ch; the handler gives them back on free.
type captureClient struct {
	ch      chan capFrame
	free    chan []byte
	made    int    // loop goroutine
	dropped uint64 // loop goroutine
	size    int    // buffer size: the pool's largest frame
}

// portCapture fans one port's tap out to its clients (loop goroutine).
type portCapture struct{ clients []*captureClient }

func (pc *portCapture) TapFrame(ts int64, dir pcap.Direction, frame []byte, origLen int) {
	for _, c := range pc.clients {
		var buf []byte
		select {
		case buf = <-c.free:
		default:
			if c.made >= captureQueue {
				c.dropped++
				continue
			}
			c.made++
			buf = make([]byte, c.size)
		}
		if len(buf) < len(frame) {
			buf = make([]byte, len(frame))
		}
		n := copy(buf, frame)
		select {
		case c.ch <- capFrame{ts: ts, dir: dir, buf: buf, n: n, orig: origLen}:
		default:
			c.dropped++
			c.free <- buf
		}
	}
}

func portNamesHint() string {
	return "port names look like p0.t0.1/3 (plane 0, T0 switch 1, port 3), p0.t1.0/2 (a T1 port) or h5/p2 (host 5's NIC port on plane 2); GET " +
		labapi.FabricPortsPath + " lists them"
}

func (f *Fabric) serveCapture(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("port")
	if name == "" {
		writeError(w, http.StatusBadRequest, "port: missing; "+portNamesHint())
		return
	}
	var port, tapped *fabric.Port
	c := &captureClient{ch: make(chan capFrame, captureQueue), free: make(chan []byte, captureQueue), size: f.topo.Pool.LargeCap}
	flip := false
	if err := f.Do(func() {
		port = f.topo.Port(name)
		if port == nil {
			return
		}
		tapped = port
		if _, sw := port.Owner.(*fabric.Switch); !sw && port.Peer != nil {
			// A host's NIC port lives in the host process: here its
			// cable is seen at the T0 end, directions as the NIC sees them.
			tapped, flip = port.Peer, true
		}
		pc := f.captures[tapped]
		if pc == nil {
			pc = &portCapture{}
			f.captures[tapped] = pc
			tapped.Tap(pc)
		}
		pc.clients = append(pc.clients, c)
	}); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if port == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("port: no port %q; %s", name, portNamesHint()))
		return
	}
	defer f.Do(func() {
		pc := f.captures[tapped]
		for i, x := range pc.clients {
			if x == c {
				pc.clients = append(pc.clients[:i], pc.clients[i+1:]...)
				break
			}
		}
		if len(pc.clients) == 0 {
			tapped.Tap(nil)
			delete(f.captures, tapped)
		}
		if c.dropped > 0 {
			f.log.printf("capture %s: the client was slow, %d frames dropped", name, c.dropped)
		}
	})
	w.Header().Set("Content-Type", "application/vnd.tcpdump.pcapng")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ng, err := pcap.NewNGWriter(w, "vcluster fabric")
	if err != nil {
		return
	}
	desc := "vcluster fabric port " + name
	if flip {
		desc += " (seen at " + tapped.Name + ")"
	}
	if _, err := ng.AddInterface(pcap.Interface{Name: name, Description: desc, LinkType: pcap.LinkTypeEthernet}); err != nil {
		return
	}
	flush := func() bool {
		if ng.Flush() != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !flush() {
		return
	}
	write := func(fr capFrame) error {
		dir := fr.dir
		if flip {
			switch dir {
			case pcap.DirInbound:
				dir = pcap.DirOutbound
			case pcap.DirOutbound:
				dir = pcap.DirInbound
			}
		}
		err := ng.WritePacket(0, f.unix0+int64(float64(fr.ts)*f.slow), dir, fr.buf[:fr.n], fr.orig)
		c.free <- fr.buf
		return err
	}
	for {
		select {
		case fr := <-c.ch:
			if write(fr) != nil {
				return
			}
		drain:
			for range captureQueue {
				select {
				case fr := <-c.ch:
					if write(fr) != nil {
						return
					}
				default:
					break drain
				}
			}
			if !flush() {
				return
			}
		case <-r.Context().Done():
			return
		case <-f.stopped:
			return
		}
	}
}
