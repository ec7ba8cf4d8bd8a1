package units

import (
	"strings"
	"testing"
	"time"
)

func TestDurationOr(t *testing.T) {
	if d, err := DurationOr("f", "", 7*time.Second); d != 7*time.Second || err != nil {
		t.Errorf(`"": %v, %v; want the default`, d, err)
	}
	if d, err := DurationOr("f", "250us", time.Second); d != 250*time.Microsecond || err != nil {
		t.Errorf(`"250us": %v, %v`, d, err)
	}
	if _, err := DurationOr("transport.x.rto", "3 parsecs", 0); err == nil || !strings.HasPrefix(err.Error(), "transport.x.rto: ") {
		t.Errorf("bad value: %v, want an error naming the field", err)
	}
}
