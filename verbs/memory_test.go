package verbs

import "testing"

func TestMemoryLookupBounds(t *testing.T) {
	var m Memory
	a := m.Register(make([]byte, 100))
	b := m.RegisterVirtual(1 << 30)
	if a.Key != 1 || b.Key != 2 || a.VA == 0 || b.VA < a.VA+a.Len {
		t.Fatalf("regions %+v %+v", a, b)
	}
	cases := []struct {
		key   uint32
		va, n uint64
		err   error
	}{
		{1, a.VA, 100, nil},
		{1, a.VA + 99, 1, nil},
		{1, a.VA + 100, 0, nil},
		{1, a.VA + 100, 1, ErrOutOfBounds},
		{1, a.VA - 1, 1, ErrOutOfBounds},
		{1, a.VA, 101, ErrOutOfBounds},
		{1, a.VA + 50, ^uint64(0), ErrOutOfBounds},
		{0, a.VA, 1, ErrBadKey},
		{3, a.VA, 1, ErrBadKey},
		{2, b.VA + 1<<29, 1 << 29, nil},
	}
	for _, c := range cases {
		if _, err := m.Lookup(c.key, c.va, c.n); err != c.err {
			t.Errorf("Lookup(%d, %#x, %d) = %v, want %v", c.key, c.va, c.n, err, c.err)
		}
	}
	buf, err := m.Bytes(1, a.VA+10, 5)
	if err != nil || len(buf) != 5 || &buf[0] != &a.Buf[10] {
		t.Fatalf("Bytes: %v %d", err, len(buf))
	}
	if buf, err := m.Bytes(2, b.VA, 10); err != nil || buf != nil {
		t.Fatalf("virtual Bytes: %v %v", buf, err)
	}
}
