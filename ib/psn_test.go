package ib

import "testing"

func TestPSNArithmeticWraps(t *testing.T) {
	cases := []struct {
		a, b uint32
		d    int
	}{{5, 3, 2}, {3, 5, -2}, {0, PSNMask, 1}, {PSNMask, 0, -1}, {1 << 23, 0, -(1 << 23)}, {1<<23 - 1, 0, 1<<23 - 1}}
	for _, c := range cases {
		if g := PSNDiff(c.a, c.b); g != c.d {
			t.Errorf("PSNDiff(%#x, %#x) = %d, want %d", c.a, c.b, g, c.d)
		}
	}
	if PSNAdd(PSNMask, 1) != 0 || PSNAdd(0, -1) != PSNMask || PSNAdd(10, 5) != 15 {
		t.Fatal("PSNAdd does not wrap at 2^24")
	}
}
