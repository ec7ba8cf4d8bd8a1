package experiments

import (
	"math"
	"slices"
	"testing"
	"time"
)

// The incast senders and the victim's source come round-robin from the
// racks other than host 0's, so a 7:1 incast on cluster D uses every
// other rack and the victim shares its rack's uplinks with incast senders.
func TestCollateralSources(t *testing.T) {
	s, v, err := coSources(4, 16, 7)
	if err != nil || !slices.Equal(s, []int{4, 8, 12, 5, 9, 13, 6}) || v != 10 {
		t.Errorf("coSources(4, 16, 7) = %v, %d, %v", s, v, err)
	}
	if _, _, err := coSources(4, 16, 12); err == nil {
		t.Error("12 senders + a victim source fit in 12 hosts of other racks")
	}
}

func TestRateWindows(t *testing.T) {
	g := []float64{10, 20, 30, 40} // (0,1µs], (1,2], (2,3], (3,4]
	if m := meanRate(g, time.Microsecond, 1000, 3000); m != 25 {
		t.Errorf("meanRate over [1, 3] µs = %v, want 25", m)
	}
	if m := minRate(g, time.Microsecond, 1000, 4000); m != 20 {
		t.Errorf("minRate over [1, 4] µs = %v, want 20", m)
	}
	if m := meanRate(g, time.Microsecond, 1500, 2500); !math.IsNaN(m) {
		t.Errorf("meanRate with no whole sample = %v, want NaN", m)
	}
	b := binned("x", []float64{1, 3, 5, 7, 9}, 0, 1, 2)
	if !slices.Equal(b.X, []float64{3, 5}) || !slices.Equal(b.Y, []float64{3, 8}) {
		t.Errorf("binned = %v %v", b.X, b.Y)
	}
}
