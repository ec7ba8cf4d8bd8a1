package tunnel

// Receiver is the receive path of one direction at one end: the fabric
// has one for ToFabric frames from every host, a host one for ToHost
// frames. For each frame it peeks the header, finds the host's key,
// checks the direction and the stream's window, verifies the tag and only
// then commits the seq, counting every drop in its Counters.
//
// It is not safe for concurrent use: one reader goroutine owns it. Add
// every host before frames arrive (AddHost allocates; Receive does not,
// once each stream has been seen).
type Receiver struct {
	dir      Dir
	counters *Counters
	hosts    map[uint16]*hostStreams
}

type hostStreams struct {
	key     *Key
	windows [256]*Window // by plane, made on a stream's first accepted frame
}

// NewReceiver returns a receiver accepting frames travelling dir, counting
// drops in counters (a new Counters if nil).
func NewReceiver(dir Dir, counters *Counters) *Receiver {
	if counters == nil {
		counters = new(Counters)
	}
	return &Receiver{dir: dir, counters: counters, hosts: make(map[uint16]*hostStreams)}
}

// AddHost makes frames from (or for) k's host acceptable. Adding a host
// again replaces its key and keeps its windows.
func (r *Receiver) AddHost(k *Key) {
	if hs := r.hosts[k.host]; hs != nil {
		hs.key = k
		return
	}
	r.hosts[k.host] = &hostStreams{key: k}
}

// Counters is where the receiver counts its drops.
func (r *Receiver) Counters() *Counters { return r.counters }

// Window is the window of stream (host, plane), nil before its first
// accepted frame.
func (r *Receiver) Window(host uint16, plane uint8) *Window {
	if hs := r.hosts[host]; hs != nil {
		return hs.windows[plane]
	}
	return nil
}

// Receive authenticates b: on success the header and the payload
// (aliasing b); on a drop a *DropError whose Reason was counted. The order
// of the checks: Malformed, UnknownHost, WrongDir, Stale/Replay (before
// the tag, so a flood of old frames costs no HMAC), BadTag.
func (r *Receiver) Receive(b []byte) (Header, []byte, error) {
	h, err := Peek(b)
	if err != nil {
		r.counters.Drop(Malformed)
		return Header{}, nil, err
	}
	hs := r.hosts[h.Host]
	if hs == nil {
		r.counters.Drop(UnknownHost)
		return Header{}, nil, errUnknown
	}
	if h.Dir != r.dir {
		r.counters.Drop(WrongDir)
		return Header{}, nil, errWrongDir
	}
	w := hs.windows[h.Plane]
	if w != nil {
		switch w.Check(h.Session, h.Seq) {
		case Replay:
			r.counters.Drop(Replay)
			return Header{}, nil, errReplay
		case Stale:
			r.counters.Drop(Stale)
			return Header{}, nil, errStale
		}
	}
	_, payload, err := Open(b, hs.key)
	if err != nil {
		r.counters.Drop(err.(*DropError).Reason)
		return Header{}, nil, err
	}
	if w == nil {
		w = new(Window)
		hs.windows[h.Plane] = w
	}
	w.Commit(h.Session, h.Seq)
	return h, payload, nil
}
