package units

import (
	"fmt"
	"strings"
	"time"
)

// ParseDuration reads a Go duration ("300us", "1.5ms", "2s", "-1s"; see
// time.ParseDuration), surrounding space ignored; "0" and "" (all space
// included) are 0. The error reads
// `"x" is not a duration (e.g. 300us, 2ms, 1s)` with x trimmed.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 300us, 2ms, 1s)", s)
	}
	return d, nil
}

// DurationOr parses a config field already validated as a Go duration
// (time.ParseDuration's syntax), or returns def when the field is empty;
// the error, a guard, names the field.
func DurationOr(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", field, err)
	}
	return d, nil
}
