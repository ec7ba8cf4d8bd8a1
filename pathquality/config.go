package pathquality

import (
	"fmt"
	"math"
	"time"

	"github.com/vcluster/vcluster/fabric"
)

// The defaults (the seed's where it gives one).
const (
	DefaultSamplePeriod    = 500 * time.Millisecond
	DefaultAdvertisePeriod = time.Second
	DefaultDampingFraction = 0.1
	DefaultDampingMinGbps  = 1.0
	DefaultControlDelay    = 100 * time.Microsecond
	// delayRefFactor: DelayRef defaults to this many RDMA thresholds.
	delayRefFactor = 10
)

// DefaultWeights are the score's default weights.
var DefaultWeights = Weights{Bandwidth: 0.5, Queue: 0.25, Delay: 0.25}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.SamplePeriod == 0 {
		c.SamplePeriod = DefaultSamplePeriod
	}
	if c.AdvertisePeriod == 0 {
		c.AdvertisePeriod = max(DefaultAdvertisePeriod, c.SamplePeriod)
	}
	if c.Weights == (Weights{}) {
		c.Weights = DefaultWeights
	}
	if c.DampingFraction == 0 {
		c.DampingFraction = DefaultDampingFraction
	}
	if c.DampingMinGbps == 0 {
		c.DampingMinGbps = DefaultDampingMinGbps
	}
	if c.ControlDelay == 0 {
		c.ControlDelay = DefaultControlDelay
	}
	c.HDC = c.HDC.WithDefaults()
	if c.DelayRef == 0 {
		c.DelayRef = delayRefFactor * c.HDC.RDMAThreshold
	}
	return c
}

// Validate reports the first invalid field of c (after WithDefaults) as
// "field: must be <allowed range>, got value"; field names are the config
// keys under fabric.pathQuality (samplePeriod, advertisePeriod,
// weights.bandwidth, …, hdc.rdmaThreshold).
func (c Config) Validate() error {
	c = c.WithDefaults()
	dur := func(field string, v, lo, hi time.Duration) error {
		if v < lo || v > hi {
			return fmt.Errorf("%s: must be %v..%v, got %v", field, lo, hi, v)
		}
		return nil
	}
	nonNeg := func(field string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%s: must be finite and ≥ 0, got %v", field, v)
		}
		return nil
	}
	checks := []func() error{
		func() error { return dur("samplePeriod", c.SamplePeriod, time.Microsecond, 10*time.Second) },
		func() error {
			return dur("advertisePeriod", c.AdvertisePeriod, c.SamplePeriod, time.Minute)
		},
		func() error { return nonNeg("weights.bandwidth", c.Weights.Bandwidth) },
		func() error { return nonNeg("weights.queue", c.Weights.Queue) },
		func() error { return nonNeg("weights.delay", c.Weights.Delay) },
		func() error {
			if s := c.Weights.Bandwidth + c.Weights.Queue + c.Weights.Delay; !(s > 0) || math.IsInf(s, 0) {
				return fmt.Errorf("weights: must sum to a finite value > 0, got %v", s)
			}
			return nil
		},
		func() error {
			if c.QueueRefBytes < 0 {
				return fmt.Errorf("queueRefBytes: must be ≥ 0 (0: the port's buffer), got %d", c.QueueRefBytes)
			}
			return nil
		},
		func() error {
			if math.IsNaN(c.DampingFraction) || c.DampingFraction < 0 || c.DampingFraction > 1 {
				return fmt.Errorf("damping.fraction: must be 0..1, got %v", c.DampingFraction)
			}
			return nil
		},
		func() error { return nonNeg("damping.minGbps", c.DampingMinGbps) },
		func() error { return dur("controlDelay", c.ControlDelay, 0, time.Second) },
		func() error { return dur("hdc.rdmaThreshold", c.HDC.RDMAThreshold, 0, time.Second) },
		func() error { return dur("hdc.otherThreshold", c.HDC.OtherThreshold, 0, time.Second) },
		// After the RDMA threshold: its default derives from it.
		func() error { return dur("delayRef", c.DelayRef, time.Nanosecond, time.Second) },
		func() error {
			if c.HDC.SnapLen < 0 || c.HDC.SnapLen > fabric.HDCSnapLen {
				return fmt.Errorf("hdc.snapLen: must be 0..%d, got %d", fabric.HDCSnapLen, c.HDC.SnapLen)
			}
			return nil
		},
		func() error {
			if c.HDC.MaxRecords < 0 {
				return fmt.Errorf("hdc.maxRecords: must be ≥ 0, got %d", c.HDC.MaxRecords)
			}
			return nil
		},
	}
	for _, f := range checks {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}
