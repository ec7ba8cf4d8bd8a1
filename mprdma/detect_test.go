package mprdma

import "testing"

func TestDegreeWindowedMax(t *testing.T) {
	var d degree
	d.init(5, 4) // OMax 5, windows of 4 arrivals
	steps := []struct {
		lag    int
		sample bool
		want   int
	}{
		{0, true, 5}, {2, true, 5}, {9, false, 5}, // not a sample: ignored
		{1, true, 2}, // the first window closes: it measured 2, OMax is gone
		{7, true, 7}, {0, true, 7}, {0, true, 7},
		{0, true, 7}, // the second closes with 7: it counts through the third
		{3, true, 7}, {0, true, 7}, {0, true, 7},
		{0, true, 3}, // the third closes: 7 forgotten, 3 from it remains
		{0, true, 3}, {0, true, 3}, {0, true, 3},
		{0, true, 0}, // a window without reordering: ob_max 0
	}
	for i, s := range steps {
		d.arrival(s.lag, s.sample)
		if got := d.obMax(); got != s.want {
			t.Fatalf("arrival %d (lag %d): ob_max %d, want %d", i+1, s.lag, got, s.want)
		}
	}
}
