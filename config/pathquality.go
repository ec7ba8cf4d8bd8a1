package config

import (
	"strings"
	"sync"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/pathquality"
)

// PathQualityConfig is seed 003's control plane on every switch (package
// pathquality, docs/pathquality.md): the counter sampler, high-delay
// capture, the per-link score and the path-bandwidth advertisements that
// forwarding pathquality weighs its next hops by. The keys are
// pathquality.Config's; its Validate is the one source of their ranges.
type PathQualityConfig struct {
	// Mode is "auto" (on when fabric.forwarding is pathquality), "on" (also
	// under ecmp, static or usid forwarding: it measures and advertises
	// without steering, for comparisons) or "off".
	Mode string `mapstructure:"mode" yaml:"mode" json:"mode"`
	// SamplePeriod is how often each switch reads its ports' counters (Go
	// duration; the seed's 500ms; shorter, scaled periods for microsecond
	// fabrics, docs/pathquality.md).
	SamplePeriod string `mapstructure:"samplePeriod" yaml:"samplePeriod" json:"samplePeriod"`
	// AdvertisePeriod is how often each switch advertises its path
	// bandwidth to its neighbours (Go duration; the seed's 1s).
	AdvertisePeriod string `mapstructure:"advertisePeriod" yaml:"advertisePeriod" json:"advertisePeriod"`
	// QueueRefBytes is the mean queue depth at which the queue factor is 0;
	// 0: the port's buffer.
	QueueRefBytes int `mapstructure:"queueRefBytes" yaml:"queueRefBytes" json:"queueRefBytes"`
	// DelayRef is the mean queueing delay at which the delay factor is 0
	// (Go duration); 0s: 10 × hdc.rdmaThreshold.
	DelayRef string `mapstructure:"delayRef" yaml:"delayRef" json:"delayRef"`
	// ControlDelay is the time from a switch sending an update to its
	// neighbour applying it (Go duration).
	ControlDelay string `mapstructure:"controlDelay" yaml:"controlDelay" json:"controlDelay"`
	// Weights weigh the link score's factors (normalized to sum 1).
	Weights PathQualityWeights `mapstructure:"weights" yaml:"weights" json:"weights"`
	// Damping holds back updates for small changes.
	Damping PathQualityDamping `mapstructure:"damping" yaml:"damping" json:"damping"`
	// HDC is every switch's high-delay capture.
	HDC PathQualityHDC `mapstructure:"hdc" yaml:"hdc" json:"hdc"`
}

// PathQualityWeights are pathquality.Weights.
type PathQualityWeights struct {
	// Bandwidth weighs the link's unused share of its capacity.
	Bandwidth float64 `mapstructure:"bandwidth" yaml:"bandwidth" json:"bandwidth"`
	// Queue weighs its mean queue depth against queueRefBytes.
	Queue float64 `mapstructure:"queue" yaml:"queue" json:"queue"`
	// Delay weighs its mean HDC queueing delay against delayRef.
	Delay float64 `mapstructure:"delay" yaml:"delay" json:"delay"`
}

// PathQualityDamping: a switch sends no update for a subnet unless its
// path bandwidth moved from the last advertised value by more than both.
type PathQualityDamping struct {
	// Fraction is the least relative change that is advertised.
	Fraction float64 `mapstructure:"fraction" yaml:"fraction" json:"fraction"`
	// MinGbps is the least absolute change that is advertised, Gb/s.
	MinGbps float64 `mapstructure:"minGbps" yaml:"minGbps" json:"minGbps"`
}

// PathQualityHDC is fabric.HDCConfig.
type PathQualityHDC struct {
	// RDMAThreshold is the queueing delay beyond which a RoCEv2 frame is
	// captured (Go duration; the seed's 5us).
	RDMAThreshold string `mapstructure:"rdmaThreshold" yaml:"rdmaThreshold" json:"rdmaThreshold"`
	// OtherThreshold is the queueing delay beyond which any other frame
	// is captured (Go duration; the seed's 50us).
	OtherThreshold string `mapstructure:"otherThreshold" yaml:"otherThreshold" json:"otherThreshold"`
	// SnapLen is the bytes of the frame a record keeps (the seed's 150).
	SnapLen int `mapstructure:"snapLen" yaml:"snapLen" json:"snapLen"`
	// MaxRecords bounds the records each switch's collector keeps; beyond
	// it they are counted, not kept.
	MaxRecords int `mapstructure:"maxRecords" yaml:"maxRecords" json:"maxRecords"`
}

// Modes of fabric.pathQuality.mode.
const (
	PathQualityAuto = "auto"
	PathQualityOn   = "on"
	PathQualityOff  = "off"
)

// ForwardingPathQuality is forwarding mode pathquality's config word.
const ForwardingPathQuality = fabric.ForwardPathQualityName

// defaultPathQuality is the section's default: pathquality's defaults
// (TestPathQualityDefaults holds them equal), with the two derived
// references left 0.
func defaultPathQuality() PathQualityConfig {
	return PathQualityConfig{
		Mode:            PathQualityAuto,
		SamplePeriod:    "500ms",
		AdvertisePeriod: "1s",
		Weights:         PathQualityWeights{Bandwidth: 0.5, Queue: 0.25, Delay: 0.25},
		QueueRefBytes:   0,
		DelayRef:        "0s",
		Damping:         PathQualityDamping{Fraction: 0.1, MinGbps: 1},
		ControlDelay:    "100us",
		HDC:             PathQualityHDC{RDMAThreshold: "5us", OtherThreshold: "50us", SnapLen: fabric.HDCSnapLen, MaxRecords: 100000},
	}
}

// PathQualityEnabled reports whether the control plane runs: mode on, or
// auto with forwarding pathquality.
func (c Config) PathQualityEnabled() bool {
	switch c.Fabric.PathQuality.Mode {
	case PathQualityOn:
		return true
	case PathQualityAuto:
		return c.Fabric.Forwarding == ForwardingPathQuality
	}
	return false
}

// PathQuality returns the control plane's configuration: the section's
// values (durations parsed; 0 for one that does not parse), applying
// weights only under forwarding pathquality. Call it on a validated
// config.
func (c Config) PathQuality() pathquality.Config {
	p := c.Fabric.PathQuality
	return pathquality.Config{
		SamplePeriod:    durationOrZero(p.SamplePeriod),
		AdvertisePeriod: durationOrZero(p.AdvertisePeriod),
		Weights:         pathquality.Weights{Bandwidth: p.Weights.Bandwidth, Queue: p.Weights.Queue, Delay: p.Weights.Delay},
		QueueRefBytes:   p.QueueRefBytes,
		DelayRef:        durationOrZero(p.DelayRef),
		DampingFraction: p.Damping.Fraction,
		DampingMinGbps:  p.Damping.MinGbps,
		ControlDelay:    durationOrZero(p.ControlDelay),
		HDC: fabric.HDCConfig{RDMAThreshold: durationOrZero(p.HDC.RDMAThreshold), OtherThreshold: durationOrZero(p.HDC.OtherThreshold),
			SnapLen: p.HDC.SnapLen, MaxRecords: p.HDC.MaxRecords},
		Apply: c.Fabric.Forwarding == ForwardingPathQuality,
	}
}

const pathQualityPrefix = "fabric.pathQuality."

// pathQualityProbes sets each key of the section, as pathquality.Config
// holds it, to a value outside its range (every key refuses a negative):
// what pathQualityRanges asks Validate about.
var pathQualityProbes = []struct {
	key string
	set func(*pathquality.Config)
}{
	{"samplePeriod", func(c *pathquality.Config) { c.SamplePeriod = -1 }},
	{"advertisePeriod", func(c *pathquality.Config) { c.AdvertisePeriod = -1 }},
	{"weights.bandwidth", func(c *pathquality.Config) { c.Weights.Bandwidth = -1 }},
	{"weights.queue", func(c *pathquality.Config) { c.Weights.Queue = -1 }},
	{"weights.delay", func(c *pathquality.Config) { c.Weights.Delay = -1 }},
	{"queueRefBytes", func(c *pathquality.Config) { c.QueueRefBytes = -1 }},
	{"delayRef", func(c *pathquality.Config) { c.DelayRef = -1 }},
	{"damping.fraction", func(c *pathquality.Config) { c.DampingFraction = -1 }},
	{"damping.minGbps", func(c *pathquality.Config) { c.DampingMinGbps = -1 }},
	{"controlDelay", func(c *pathquality.Config) { c.ControlDelay = -1 }},
	{"hdc.rdmaThreshold", func(c *pathquality.Config) { c.HDC.RDMAThreshold = -1 }},
	{"hdc.otherThreshold", func(c *pathquality.Config) { c.HDC.OtherThreshold = -1 }},
	{"hdc.snapLen", func(c *pathquality.Config) { c.HDC.SnapLen = -1 }},
	{"hdc.maxRecords", func(c *pathquality.Config) { c.HDC.MaxRecords = -1 }},
}

// pathQualityRanges is each key's allowed range as pathquality's Validate
// words it ("field: must be <range>, got value"), keyed by the full config path: Schema and
// docs/config.md show what the control plane enforces without a second
// copy of its bounds here.
var pathQualityRanges = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	base := Default()
	base.Fabric.Forwarding = ForwardingPathQuality
	for _, p := range pathQualityProbes {
		c := base.PathQuality().WithDefaults()
		p.set(&c)
		err := c.Validate()
		if err == nil {
			continue
		}
		field, reason, ok := splitPathQualityError(err)
		if !ok || field != p.key {
			continue
		}
		r := rangeOf(reason)
		if p.key == "advertisePeriod" {
			// Its lower bound is samplePeriod's value: name the key.
			r = strings.Replace(r, c.SamplePeriod.String()+"..", "samplePeriod..", 1)
		}
		out[pathQualityPrefix+p.key] = r
	}
	return out
})

// pathQualityFloat reports whether path is one of the section's float
// keys.
func pathQualityFloat(path string) bool {
	k, ok := strings.CutPrefix(path, pathQualityPrefix)
	return ok && (strings.HasPrefix(k, "weights.") || strings.HasPrefix(k, "damping."))
}

// splitPathQualityError splits a pathquality.Config.Validate error into
// its field and the rest of its message.
func splitPathQualityError(err error) (field, rest string, ok bool) {
	return strings.Cut(err.Error(), ": ")
}

// rangeOf is the allowed range a "reason, got value" message states: the
// reason without its value and without "must be".
func rangeOf(msg string) string {
	reason, _, _ := strings.Cut(msg, ", got ")
	return strings.TrimPrefix(reason, "must be ")
}

// validate checks the section's syntax (durations) and mode; the values'
// ranges are pathquality's (validatePathQuality).
func (p *PathQualityConfig) validate(v *validator) {
	v.oneOf(pathQualityPrefix+"mode", p.Mode, PathQualityAuto, PathQualityOn, PathQualityOff)
	for _, d := range []struct{ key, s, example string }{
		{"samplePeriod", p.SamplePeriod, "500ms"},
		{"advertisePeriod", p.AdvertisePeriod, "1s"},
		{"delayRef", p.DelayRef, "50us"},
		{"controlDelay", p.ControlDelay, "100us"},
		{"hdc.rdmaThreshold", p.HDC.RDMAThreshold, "5us"},
		{"hdc.otherThreshold", p.HDC.OtherThreshold, "50us"},
	} {
		path := pathQualityPrefix + d.key
		v.describe(path, func(r *fieldRule) { r.kind = "duration" })
		v.duration(path, d.s, d.example)
	}
}

// validatePathQuality checks the section against the rest of the config
// and, when the control plane runs, its values through
// pathquality.Config.Validate (its first invalid field, named with the
// section's prefix).
func (c *Config) validatePathQuality(v *validator) {
	p := c.Fabric.PathQuality
	p.validate(v)
	if v.rules != nil {
		for path, r := range pathQualityRanges() {
			if !pathQualityFloat(path) { // floatRange states a float's
				v.describe(path, func(fr *fieldRule) { fr.note = r })
			}
		}
	}
	if p.Mode == PathQualityOff && c.Fabric.Forwarding == ForwardingPathQuality {
		v.add(pathQualityPrefix+"mode", "off with fabric.forwarding pathquality leaves the switches without path weights (they would forward as plain ecmp); set mode auto or on, or fabric.forwarding ecmp", p.Mode)
	}
	if !c.PathQualityEnabled() || !pathQualityDurationsParse(p) {
		return
	}
	if err := c.PathQuality().WithDefaults().Validate(); err != nil {
		field, rest, _ := splitPathQualityError(err)
		v.errs = append(v.errs, &FieldError{Path: pathQualityPrefix + field, Reason: rest})
	}
}

// pathQualityDurationsParse reports whether every duration of p parses
// (one that does not is reported by its syntax alone).
func pathQualityDurationsParse(p PathQualityConfig) bool {
	for _, s := range []string{p.SamplePeriod, p.AdvertisePeriod, p.DelayRef, p.ControlDelay, p.HDC.RDMAThreshold, p.HDC.OtherThreshold} {
		if _, err := time.ParseDuration(s); err != nil {
			return false
		}
	}
	return true
}
