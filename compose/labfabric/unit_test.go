package labfabric

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric/pcap"
)

// The histogram's quantiles are within its bucket width (1/8) of the
// exact ones, never above the maximum, and it does not allocate.
func TestLagHistQuantiles(t *testing.T) {
	var h lagHist
	if h.Quantile(0.5) != 0 {
		t.Errorf("empty: %d", h.Quantile(0.5))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var xs []int64
	for range 100_000 {
		x := int64(rng.ExpFloat64() * 50_000) // ns, mean 50 µs
		xs = append(xs, x)
		h.Observe(time.Duration(x))
	}
	slices.Sort(xs)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := xs[int(q*float64(len(xs)))-1]
		got := h.Quantile(q)
		if float64(got) < float64(exact)*0.99 || float64(got) > float64(exact)*1.13+8 {
			t.Errorf("q%v: %d, exact %d", q, got, exact)
		}
	}
	if h.Quantile(1) != xs[len(xs)-1] || h.max != xs[len(xs)-1] {
		t.Errorf("max %d / q1 %d, want %d", h.max, h.Quantile(1), xs[len(xs)-1])
	}
	for _, ns := range []int64{0, 1, 7, 8, 9, 15, 16, 17, 1000, 1 << 40, 1<<62 + 12345} {
		b := lagBucket(ns)
		if lagUpper(b) < ns || (b > 0 && lagUpper(b-1) >= ns) {
			t.Errorf("%d: bucket %d holds up to %d, the one below up to %d", ns, b, lagUpper(b), lagUpper(b-1))
		}
	}
	if a := testing.AllocsPerRun(1000, func() { h.Observe(123456) }); a != 0 {
		t.Errorf("Observe allocates %v", a)
	}
}

// A capture client that does not keep up loses frames, counted, and the
// others (and the port) are unaffected.
func TestCaptureSlowClientDrops(t *testing.T) {
	slow := &captureClient{ch: make(chan capFrame, 2), free: make(chan []byte, captureQueue), size: 64}
	fast := &captureClient{ch: make(chan capFrame, 16), free: make(chan []byte, captureQueue), size: 64}
	pc := &portCapture{clients: []*captureClient{slow, fast}}
	frame := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdefXX") // longer than size
	for i := range 5 {
		pc.TapFrame(int64(i), pcap.DirOutbound, frame, 100)
	}
	if slow.dropped != 3 || len(slow.ch) != 2 {
		t.Errorf("slow client: %d dropped, %d queued; want 3, 2", slow.dropped, len(slow.ch))
	}
	if fast.dropped != 0 || len(fast.ch) != 5 {
		t.Errorf("fast client: %d dropped, %d queued", fast.dropped, len(fast.ch))
	}
	fr := <-fast.ch
	if string(fr.buf[:fr.n]) != string(frame) || fr.orig != 100 || fr.dir != pcap.DirOutbound {
		t.Errorf("copied frame %q (%d, %v)", fr.buf[:fr.n], fr.orig, fr.dir)
	}
}
