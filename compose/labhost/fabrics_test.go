package labhost

import (
	"strings"
	"testing"
)

// TestOptionsFabrics: --fabric is one address for every plane or one per
// plane in plane order; anything else is refused naming the flag.
func TestOptionsFabrics(t *testing.T) {
	lab := testLab(t) // preset C: 4 planes
	for _, c := range []struct {
		fabric string
		want   []string
		err    string
	}{
		{"127.0.0.1:7400", []string{"127.0.0.1:7400", "127.0.0.1:7400", "127.0.0.1:7400", "127.0.0.1:7400"}, ""},
		{"f0:7400, f1:7400,f2:7400,f3:7400", []string{"f0:7400", "f1:7400", "f2:7400", "f3:7400"}, ""},
		{"f0:7400,f1:7400", nil, "--fabric: 2 addresses for 4 planes"},
		{"f0:7400,,f2:7400,f3:7400", nil, `--fabric: "" is not a host:port address`},
		{"nowhere", nil, `--fabric: "nowhere" is not a host:port address`},
	} {
		o := Options{Lab: lab, Fabric: c.fabric}
		got, err := o.fabrics()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.fabric, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q: %v, %v; want %v", c.fabric, got, err, c.want)
		}
	}
}
