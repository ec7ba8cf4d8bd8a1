package labdocker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
)

// TestLoadSwarm: every generated variant passes the swarm profile.
func TestLoadSwarm(t *testing.T) {
	for name, s := range variants() {
		p := loadLab(t, s, true)
		if len(p.Services) == 0 {
			t.Errorf("%s: no services", name)
		}
	}
}

// TestCheckSwarmRejects: each rule of the swarm profile names the
// service (or network) and the field.
func TestCheckSwarmRejects(t *testing.T) {
	s := variants()["monitoring"]
	for _, tc := range []struct {
		what   string
		change func(*types.Project)
		want   string
	}{
		{"build", func(p *types.Project) {
			p.Services["h0"] = with(p.Services["h0"], func(v *types.ServiceConfig) { v.Build = &types.BuildConfig{Context: "."} })
		},
			"service h0: build:"},
		{"no image", func(p *types.Project) {
			p.Services["h1"] = with(p.Services["h1"], func(v *types.ServiceConfig) { v.Image = "" })
		},
			"service h1: image: empty"},
		{"no deploy", func(p *types.Project) {
			p.Services["h2"] = with(p.Services["h2"], func(v *types.ServiceConfig) { v.Deploy = nil })
		},
			"service h2: deploy: missing"},
		{"no restart policy", func(p *types.Project) {
			p.Services["h3"] = with(p.Services["h3"], func(v *types.ServiceConfig) { d := *v.Deploy; d.RestartPolicy = nil; v.Deploy = &d })
		}, "service h3: deploy.restart_policy: missing"},
		{"replicas", func(p *types.Project) {
			p.Services["fabric-p0"] = with(p.Services["fabric-p0"], func(v *types.ServiceConfig) { d := *v.Deploy; n := 2; d.Replicas = &n; v.Deploy = &d })
		}, "service fabric-p0: deploy.replicas: 2"},
		{"global", func(p *types.Project) {
			p.Services["fabric-p1"] = with(p.Services["fabric-p1"], func(v *types.ServiceConfig) { d := *v.Deploy; d.Mode = "global"; v.Deploy = &d })
		}, "service fabric-p1: deploy.mode: \"global\""},
		{"depends_on condition", func(p *types.Project) {
			p.Services["h0"] = with(p.Services["h0"], func(v *types.ServiceConfig) {
				v.DependsOn = types.DependsOnConfig{"fabric-p0": {Condition: types.ServiceConditionHealthy}}
			})
		}, "service h0: depends_on: fabric-p0: condition service_healthy"},
		{"network_mode", func(p *types.Project) {
			p.Services["h0"] = with(p.Services["h0"], func(v *types.ServiceConfig) { v.NetworkMode = "host" })
		},
			"service h0: network_mode: \"host\""},
		{"host_ip", func(p *types.Project) {
			p.Services["grafana"] = with(p.Services["grafana"], func(v *types.ServiceConfig) {
				v.Ports = []types.ServicePortConfig{{HostIP: "127.0.0.1", Published: "3000", Target: 3000}}
			})
		}, "service grafana: ports: 127.0.0.1:3000 has a host_ip"},
		{"bind mount off manager", func(p *types.Project) {
			p.Services["prometheus"] = with(p.Services["prometheus"], func(v *types.ServiceConfig) { d := *v.Deploy; d.Placement.Constraints = nil; v.Deploy = &d })
		}, "service prometheus: volumes: bind mount of"},
		{"bridge network", func(p *types.Project) { n := p.Networks["lab"]; n.Driver = "bridge"; p.Networks["lab"] = n },
			"network lab: driver: \"bridge\""},
	} {
		p := loadLab(t, s, false)
		if err := CheckSwarm(p); err != nil {
			t.Fatalf("CheckSwarm of the generated lab: %v", err)
		}
		tc.change(p)
		err := CheckSwarm(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CheckSwarm = %v, want an error with %q", tc.what, err, tc.want)
		}
	}
}

// TestLoadSwarmReportsFile: Load(swarm) fails on a file stack deploy
// would not run as a lab, naming the file.
func TestLoadSwarmReportsFile(t *testing.T) {
	s := variants()["one-fabric"]
	dir := writeLab(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Load(ctx, dir, "Bad Name", false); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Errorf("Load with a bad project name: %v, want a --name error", err)
	}
	if _, err := Load(ctx, t.TempDir(), s.Name, true); err == nil {
		t.Errorf("Load of a directory without a compose file succeeded")
	}
}

func with(s types.ServiceConfig, f func(*types.ServiceConfig)) types.ServiceConfig {
	f(&s)
	return s
}
