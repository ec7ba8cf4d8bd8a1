package labcni

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"n","type":"vcluster-cni","fabricApi":"127.0.0.1:7401","secretFile":"/s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != DefaultStateDir || c.PlaneSpeed != DefaultPlaneSpeed || c.timeout != DefaultTimeout || c.hasValidAttachments {
		t.Fatalf("defaults: stateDir %q planeSpeed %q timeout %v valid-attachments given %v", c.StateDir, c.PlaneSpeed, c.timeout, c.hasValidAttachments)
	}
	c, err = ParseConfig([]byte(`{"name":"n","fabricApi":"127.0.0.1:7401","secretFile":"/s","timeout":"2m","cni.dev/valid-attachments":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout != 2*time.Minute || !c.hasValidAttachments || len(c.ValidAttachments) != 0 {
		t.Fatalf("timeout %v, valid-attachments given %v (%d)", c.timeout, c.hasValidAttachments, len(c.ValidAttachments))
	}
}

func TestHostFromArgs(t *testing.T) {
	for _, c := range []struct {
		args string
		want int
		err  string
	}{
		{"", -1, ""},
		{"IgnoreUnknown=1;K8S_POD_NAME=p", -1, ""},
		{"IgnoreUnknown=1;VCLUSTER_HOST=3", 3, ""},
		{"VCLUSTER_HOST=x", 0, "VCLUSTER_HOST"},
		{"VCLUSTER_HOST=-2", 0, "[0, fabric.hosts-1]"},
	} {
		got, err := hostFromArgs(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: want an error with %q, got %d, %v", c.args, c.err, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %d, %v; want %d", c.args, got, err, c.want)
		}
	}
}
