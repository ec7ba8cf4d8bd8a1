package verbs

import "time"

// SectionChecker is what a transport's configuration section (the YAML
// under transport.<kind>, e.g. mrc.Settings) is validated against. The
// transport states its rules once, in its own Validate; the checker —
// config's validator — prefixes the section's path ("transport.mrc."),
// words every message the way every other field's is worded, and records
// each rule, whether or not the value passes, for the config schema
// (`vcluster config schema`, docs/config.md). Fields are the section's
// YAML keys, nested ones joined with dots ("responder.immSlots").
//
// verbs holds it because it is the lowest package the transports and
// config share; it knows nothing of YAML.
type SectionChecker interface {
	// IntRange checks lo ≤ x ≤ hi.
	IntRange(field string, x, lo, hi int) bool
	// IntRangeOrZero checks x is 0 (off, unbounded) or lo ≤ x ≤ hi.
	IntRangeOrZero(field string, x, lo, hi int) bool
	// OneOf checks x is one of allowed.
	OneOf(field, x string, allowed ...string) bool
	// OptionalDuration checks that s, unless "", is a Go duration in
	// (0, hi].
	OptionalDuration(field, s string, hi time.Duration) bool
	// Float states the range of a float field as text (e.g. "{0} ∪ [0.5,
	// 64]"): the checker refuses NaN and ±Inf itself, naming it. in
	// reports whether x is allowed; when it is not, reason is the message.
	Float(field string, x float64, rangeText string, in bool, reason string)
	// Invalid reports a problem no helper above covers.
	Invalid(field, reason string, value any)
	// Note adds to the documented rule of field what no check above says
	// (a relation with another field, what 0 or "" means); Unit names its
	// unit where neither its name nor its format does.
	Note(field, text string)
	Unit(field, unit string)
}
