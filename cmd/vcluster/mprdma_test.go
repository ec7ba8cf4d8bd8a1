package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The mprdma kinds under uSID forwarding (the default fabric's) are a
// configuration error: exit 2 naming fabric.forwarding and what the kind
// needs, before anything runs or is written; so is a path count beyond
// what the fabric offers.
func TestMPRDMAKindsRefusedUpFront(t *testing.T) {
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"transport.kind=mprdma"}, `fabric.forwarding: must be "ecmp", "static" or "pathquality" with transport.kind mprdma`},
		{[]string{"transport.kind=random", "fabric.forwarding=usid"}, `fabric.forwarding: must be "ecmp", "static" or "pathquality" with transport.kind random`},
		{[]string{"transport.kind=orderre"}, `fabric.forwarding: must be "ecmp", "static" or "pathquality" with transport.kind orderre`},
		{[]string{"transport.kind=orderre", "fabric.forwarding=ecmp", "fabric.planes=1", "transport.mprdma.paths=5"},
			"transport.mprdma.paths: must be 0 (every path) or 1..4: the fabric offers 4 paths"},
	} {
		dir := filepath.Join(t.TempDir(), "never")
		args := []string{"run", "--out", dir}
		for _, s := range c.sets {
			args = append(args, "--set", s)
		}
		code, out, errOut := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr:\n%s", c.sets, code, errOut)
		}
		if !strings.Contains(errOut, c.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", c.sets, c.want, errOut)
		}
		if out != "" {
			t.Errorf("%v: stdout %q: something ran", c.sets, out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v: the output directory was created (stat: %v)", c.sets, err)
		}
	}
}
