package verbs

// MR is a registered memory region. Buf holds its bytes; a virtual region
// (Buf == nil) has a length but stores nothing — for large runs with payload
// bytes elided, where only lengths and timing matter.
type MR struct {
	Key uint32 // local and remote key (one key per region, as in most NICs)
	VA  uint64 // virtual address of the first byte
	Len uint64
	Buf []byte
}

// Virtual reports whether the region stores no bytes.
func (m *MR) Virtual() bool { return m.Buf == nil }

// Memory is one host's registered memory. Keys are dense (1, 2, …), so a
// lookup is an index, not a map.
type Memory struct {
	mrs    []*MR
	nextVA uint64
}

// Register registers buf as a region at a fresh virtual address.
func (m *Memory) Register(buf []byte) *MR { return m.add(uint64(len(buf)), buf) }

// RegisterVirtual registers a region of length bytes that stores nothing.
func (m *Memory) RegisterVirtual(length uint64) *MR { return m.add(length, nil) }

func (m *Memory) add(n uint64, buf []byte) *MR {
	if m.nextVA == 0 {
		m.nextVA = 0x10000 // VA 0 stays invalid: a zeroed field is never a valid address
	}
	r := &MR{Key: uint32(len(m.mrs) + 1), VA: m.nextVA, Len: n, Buf: buf}
	// Regions sit 64 KiB-aligned with a gap, so off-by-one VAs never land
	// in a neighbour.
	m.nextVA += (n + 0x1ffff) &^ 0xffff
	m.mrs = append(m.mrs, r)
	return r
}

// Lookup returns the region of key if [va, va+n) lies inside it.
func (m *Memory) Lookup(key uint32, va, n uint64) (*MR, error) {
	if key == 0 || int(key) > len(m.mrs) {
		return nil, ErrBadKey
	}
	r := m.mrs[key-1]
	if !r.Contains(va, n) {
		return nil, ErrOutOfBounds
	}
	return r, nil
}

// Contains reports whether [va, va+n) lies inside the region.
func (m *MR) Contains(va, n uint64) bool {
	return va >= m.VA && n <= m.Len && va-m.VA <= m.Len-n
}

// Bytes returns the n bytes at va of key: nil (and no error) for a virtual
// region.
func (m *Memory) Bytes(key uint32, va, n uint64) ([]byte, error) {
	r, err := m.Lookup(key, va, n)
	if err != nil || r.Buf == nil {
		return nil, err
	}
	off := va - r.VA
	return r.Buf[off : off+n], nil
}
