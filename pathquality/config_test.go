package pathquality

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
)

func TestWithDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.SamplePeriod != 500*time.Millisecond || c.AdvertisePeriod != time.Second || c.Weights != DefaultWeights ||
		c.DampingFraction != 0.1 || c.DampingMinGbps != 1 || c.ControlDelay != 100*time.Microsecond ||
		c.HDC.RDMAThreshold != 5*time.Microsecond || c.HDC.OtherThreshold != 50*time.Microsecond ||
		c.HDC.SnapLen != 150 || c.HDC.MaxRecords != 100000 || c.DelayRef != 50*time.Microsecond {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// A sample period above the default advert period lifts the advert period.
	if c := (Config{SamplePeriod: 2 * time.Second}).WithDefaults(); c.AdvertisePeriod != 2*time.Second {
		t.Fatalf("advertisePeriod %v, want the sample period", c.AdvertisePeriod)
	}
	// Explicit weights are kept (a zero weight is allowed).
	if c := (Config{Weights: Weights{Bandwidth: 1}}).WithDefaults(); c.Weights != (Weights{Bandwidth: 1}) {
		t.Fatalf("weights %+v", c.Weights)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		field string
		c     Config
		want  string
	}{
		{"samplePeriod", Config{SamplePeriod: -1}, "samplePeriod: must be 1µs..10s, got -1ns"},
		{"samplePeriod", Config{SamplePeriod: 500}, "samplePeriod: must be 1µs..10s, got 500ns"},
		{"samplePeriod", Config{SamplePeriod: 11 * time.Second, AdvertisePeriod: 20 * time.Second}, "samplePeriod: must be 1µs..10s, got 11s"},
		{"advertisePeriod", Config{SamplePeriod: time.Second, AdvertisePeriod: time.Millisecond}, "advertisePeriod: must be 1s..1m0s, got 1ms"},
		{"advertisePeriod", Config{AdvertisePeriod: 2 * time.Minute}, "advertisePeriod: must be 500ms..1m0s, got 2m0s"},
		{"weights.bandwidth", Config{Weights: Weights{Bandwidth: -1, Queue: 1}}, "weights.bandwidth: must be finite and ≥ 0, got -1"},
		{"weights.bandwidth", Config{Weights: Weights{Bandwidth: math.Inf(1)}}, "weights.bandwidth: must be finite and ≥ 0, got +Inf"},
		{"weights.queue", Config{Weights: Weights{Queue: nan}}, "weights.queue: must be finite and ≥ 0, got NaN"},
		{"weights.delay", Config{Weights: Weights{Bandwidth: 1, Delay: -0.5}}, "weights.delay: must be finite and ≥ 0, got -0.5"},
		{"weights", Config{Weights: Weights{Bandwidth: math.MaxFloat64, Queue: math.MaxFloat64}}, "weights: must sum to a finite value > 0, got +Inf"},
		{"queueRefBytes", Config{QueueRefBytes: -1}, "queueRefBytes: must be ≥ 0 (0: the port's buffer), got -1"},
		{"delayRef", Config{DelayRef: -time.Nanosecond}, "delayRef: must be 1ns..1s, got -1ns"},
		{"delayRef", Config{DelayRef: 2 * time.Second}, "delayRef: must be 1ns..1s, got 2s"},
		{"damping.fraction", Config{DampingFraction: 1.5}, "damping.fraction: must be 0..1, got 1.5"},
		{"damping.fraction", Config{DampingFraction: -0.1}, "damping.fraction: must be 0..1, got -0.1"},
		{"damping.minGbps", Config{DampingMinGbps: -1}, "damping.minGbps: must be finite and ≥ 0, got -1"},
		{"controlDelay", Config{ControlDelay: -1}, "controlDelay: must be 0s..1s, got -1ns"},
		{"controlDelay", Config{ControlDelay: 2 * time.Second}, "controlDelay: must be 0s..1s, got 2s"},
		{"hdc.rdmaThreshold", Config{HDC: hdcConfig(-1, 0, 0, 0)}, "hdc.rdmaThreshold: must be 0s..1s, got -1ns"},
		{"hdc.otherThreshold", Config{HDC: hdcConfig(0, 2*time.Second, 0, 0)}, "hdc.otherThreshold: must be 0s..1s, got 2s"},
		{"hdc.snapLen", Config{HDC: hdcConfig(0, 0, 151, 0)}, "hdc.snapLen: must be 0..150, got 151"},
		{"hdc.snapLen", Config{HDC: hdcConfig(0, 0, -1, 0)}, "hdc.snapLen: must be 0..150, got -1"},
		{"hdc.maxRecords", Config{HDC: hdcConfig(0, 0, 0, -1)}, "hdc.maxRecords: must be ≥ 0, got -1"},
	} {
		err := tc.c.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.field, err, tc.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("%s: error %q does not name the field first", tc.field, err)
		}
	}
}

func hdcConfig(rdma, other time.Duration, snap, max int) (c fabric.HDCConfig) {
	c.RDMAThreshold, c.OtherThreshold, c.SnapLen, c.MaxRecords = rdma, other, snap, max
	return c
}
