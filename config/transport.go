package config

import (
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/vcluster/vcluster/verbs"
)

// How config knows transports.
//
// A transport kind is valid in transport.kind when config holds a section
// for it or it was registered (RegisterTransportKind, which
// cluster.RegisterTransport calls: the cluster is where a kind's
// constructor lives, and config must not import it).
//
// A section is a field of TransportConfig whose type the transport's own
// package declares and implements Section on (mrc.Settings under
// transport.mrc, roce.Settings under transport.roce): the transport owns
// its fields, defaults and rules, config only decodes the section (its
// mapstructure tags) and validates it by calling its Validate with a
// verbs.SectionChecker that words the messages and records the rules for
// Schema. A section's key is the kind it belongs to, or the first of the
// kinds it lists when several share it (SharedSection: transport.mprdma
// serves mprdma, random and orderre). Every section is
// checked whichever kind is selected (one --set switches kinds); a section
// that also implements SelectedSection is checked against the rest of the
// config while its kind is selected. A kind without knobs needs nothing in
// config; one with knobs adds its section's field here, because Load's
// schema is the Config type itself.

// Section is a transport's config section (see above).
type Section interface {
	SetDefaults()
	Validate(check verbs.SectionChecker)
}

// SharedSection is a section more than one kind selects: Kinds lists
// them, the section's key first.
type SharedSection interface {
	Section
	Kinds() []string
}

// SelectedSection is a section with rules that hold while its kind is the
// selected transport, against the fabric (MRC: a full packet fits
// fabric.mtu). fabricMTU is a valid MTU (≥ MinMTU).
type SelectedSection interface {
	Section
	ValidateSelected(check verbs.SectionChecker, fabricMTU int)
}

var registeredKinds []string // in registration order

// RegisterTransportKind makes kind a valid transport.kind. Registering a
// kind config already knows (by its section, or registered before) does
// nothing. Call it from an init function (cluster.RegisterTransport does).
func RegisterTransportKind(kind string) {
	if kind == "" || slices.Contains(TransportKinds(), kind) {
		return
	}
	registeredKinds = append(registeredKinds, kind)
}

// TransportKinds lists the valid transport.kind values: the kinds of
// TransportConfig's sections in field order, then the registered ones in
// registration order.
func TransportKinds() []string {
	var kinds []string
	for _, s := range sectionFields {
		for _, k := range s.kinds {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	for _, k := range registeredKinds {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// sectionField is one section of TransportConfig: its key, the kinds
// that select it (its key, or a SharedSection's Kinds) and field index.
type sectionField struct {
	key   string
	kinds []string
	index int
}

var sectionFields = func() []sectionField {
	var out []sectionField
	t := reflect.TypeFor[TransportConfig]()
	sec := reflect.TypeFor[Section]()
	for i := range t.NumField() {
		f := t.Field(i)
		if !reflect.PointerTo(f.Type).Implements(sec) {
			continue
		}
		kinds := []string{fieldName(f)}
		if sh, ok := reflect.New(f.Type).Interface().(SharedSection); ok {
			kinds = sh.Kinds()
		}
		out = append(out, sectionField{fieldName(f), kinds, i})
	}
	return out
}()

// sections returns t's sections with their keys, in field order.
func (t *TransportConfig) sections() (keys []string, secs []Section) {
	v := reflect.ValueOf(t).Elem()
	for _, s := range sectionFields {
		keys = append(keys, s.key)
		secs = append(secs, v.Field(s.index).Addr().Interface().(Section))
	}
	return keys, secs
}

// setSectionDefaults gives every section its transport's defaults.
func (t *TransportConfig) setSectionDefaults() {
	_, secs := t.sections()
	for _, s := range secs {
		s.SetDefaults()
	}
}

// sectionChecker is the verbs.SectionChecker of one section: v's helpers
// under prefix.
type sectionChecker struct {
	v      *validator
	prefix string
}

func (s sectionChecker) path(field string) string { return s.prefix + "." + field }

func (s sectionChecker) IntRange(field string, x, lo, hi int) bool {
	return s.v.intRange(s.path(field), x, lo, hi)
}

func (s sectionChecker) IntRangeOrZero(field string, x, lo, hi int) bool {
	return s.v.intRangeOrZero(s.path(field), x, lo, hi)
}

func (s sectionChecker) OneOf(field, x string, allowed ...string) bool {
	return s.v.oneOf(s.path(field), x, allowed...)
}

func (s sectionChecker) OptionalDuration(field, x string, hi time.Duration) bool {
	if x == "" {
		s.v.rule(s.path(field), "duration", positiveDurationRule(hi))
		return true
	}
	_, ok := s.v.positiveDuration(s.path(field), x, hi)
	return ok
}

func (s sectionChecker) Float(field string, x float64, rangeText string, in bool, reason string) {
	p := s.path(field)
	s.v.describe(p, func(r *fieldRule) { r.float = rangeText })
	if isFinite(x) && !in { // NaN/Inf: finiteFloats
		s.v.add(p, reason, x)
	}
}

func (s sectionChecker) Invalid(field, reason string, value any) {
	s.v.add(s.path(field), reason, value)
}

func (s sectionChecker) Note(field, text string) {
	s.v.describe(s.path(field), func(r *fieldRule) { r.note = text })
}

func (s sectionChecker) Unit(field, unit string) {
	s.v.describe(s.path(field), func(r *fieldRule) { r.unit = unit })
}

// validateSections checks every section of t (see the top of this file).
func (t *TransportConfig) validateSections(v *validator) {
	keys, secs := t.sections()
	for i, s := range secs {
		s.Validate(sectionChecker{v, "transport." + keys[i]})
	}
}

// validateSelected checks the selected kind's section against the fabric.
func (c *Config) validateSelected(v *validator) {
	if c.Fabric.MTU < MinMTU {
		return // fabric.mtu is reported; nothing fits an invalid MTU
	}
	keys, secs := c.Transport.sections()
	for i, s := range secs {
		if sel, ok := s.(SelectedSection); ok && slices.Contains(sectionFields[i].kinds, c.Transport.Kind) {
			sel.ValidateSelected(sectionChecker{v, "transport." + keys[i]}, c.Fabric.MTU)
		}
	}
}

// sectionRules are the rules the sections state, recorded once from their
// defaults: their float ranges are needed before anything is validated
// (Load refuses a NaN while it parses, naming the range).
var sectionRules = sync.OnceValue(func() map[string]fieldRule {
	v := validator{rules: map[string]fieldRule{}}
	var t TransportConfig
	t.setSectionDefaults()
	t.validateSections(&v)
	return v.rules
})

// floatRange is the allowed range of a float field as its messages state
// it, "" when it has none recorded.
func floatRange(path string) string {
	if r, ok := floatRanges[path]; ok {
		return r
	}
	if pathQualityFloat(path) {
		return pathQualityRanges()[path]
	}
	return sectionRules()[path].float
}
