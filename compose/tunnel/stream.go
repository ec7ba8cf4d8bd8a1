package tunnel

// Stream numbers the frames one sender sends on one (host, plane, dir):
// every frame, whatever its kind, takes the next seq, from 1. It is not
// safe for concurrent use (the loop goroutine owns it).
type Stream struct {
	Host    uint16
	Plane   uint8
	Dir     Dir
	Session uint64 // the sender's start time, Unix ns
	seq     uint64
}

// Seal appends the stream's next frame to dst (see the package's Seal).
func (s *Stream) Seal(dst []byte, kind Kind, wireLen uint32, flags uint8, payload []byte, k *Key) []byte {
	s.seq++
	return Seal(dst, Header{Kind: kind, Dir: s.Dir, Plane: s.Plane, Host: s.Host, Session: s.Session, Seq: s.seq, WireLen: wireLen, Flags: flags}, payload, k)
}

// Sent is the seq of the last frame sealed (0 before the first).
func (s *Stream) Sent() uint64 { return s.seq }
