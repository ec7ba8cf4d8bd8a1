// Package units reads and writes the quantities users type: sizes in
// bytes, durations and link speeds. It owns their syntax and their error
// texts, one definition each, so that a flag, a config field and an
// experiment parameter that take the same quantity read it the same way.
//
// It knows nothing of what the quantities are for: ranges (a link's
// slowest speed, a flap's shortest period) are the callers' to check.
// Where today's callers read a quantity differently (a message size
// refuses 0 and stops at G; a size for a sweep takes 0 and T), each form
// has its own function, documented and pinned by units_test.go.
package units
