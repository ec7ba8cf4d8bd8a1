package labdocker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// baseSpec is a valid 4-host lab with one fabric.
func baseSpec(name string) Spec {
	return Spec{Name: name, Image: ImageRef(name), Hosts: 4, Planes: 2, PlaneSpeed: "1G", SecretSource: "lab.secret"}
}

// variants are the labs every compose-tool test runs on.
func variants() map[string]Spec {
	one := baseSpec("vct-one")
	perPlane := baseSpec("vct-planes")
	perPlane.Planes, perPlane.FabricPerPlane = 4, true
	mon := baseSpec("vct-mon")
	mon.FabricPerPlane = true
	mon.Monitoring = &Monitoring{PrometheusImage: "prom/prometheus:v2", GrafanaImage: "grafana/grafana:11"}
	cfg := baseSpec("vct-cfg")
	cfg.Config, cfg.ConfigSource = true, "lab.yaml"
	cfg.Sets = []string{"fabric.loss=0.01", "x=$HOME ${Y}"}
	cfg.HostMemLimit = "256MiB"
	cfg.TUN = true
	return map[string]Spec{"one-fabric": one, "fabric-per-plane": perPlane, "monitoring": mon, "config-sets-tun": cfg}
}

// writeLab writes s's files and fake secret and config files into a
// fresh directory.
func writeLab(t *testing.T, s Spec) string {
	t.Helper()
	files, err := Generate(s)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, s.SecretSource), []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.Config {
		if err := os.WriteFile(filepath.Join(dir, s.ConfigSource), []byte("preset: C\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadLab(t *testing.T, s Spec, swarm bool) *types.Project {
	t.Helper()
	dir := writeLab(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Load(ctx, dir, s.Name, swarm)
	if err != nil {
		t.Fatalf("Load(swarm=%v): %v", swarm, err)
	}
	return p
}

func wantLabels(t *testing.T, what string, got types.Labels, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: label %s = %q, want %q (labels %v)", what, k, got[k], v, got)
		}
	}
}

func wantHealth(t *testing.T, svc types.ServiceConfig, url string) {
	t.Helper()
	h := svc.HealthCheck
	if h == nil {
		t.Fatalf("service %s: no healthcheck", svc.Name)
	}
	if want := []string{"CMD", "/vcluster", "healthcheck", url}; !slices.Equal(h.Test, want) {
		t.Errorf("service %s: healthcheck test %q, want %q", svc.Name, h.Test, want)
	}
	for what, want := range map[string]struct {
		d    *types.Duration
		want time.Duration
	}{"interval": {h.Interval, 15 * time.Second}, "timeout": {h.Timeout, 5 * time.Second}, "start_period": {h.StartPeriod, 5 * time.Second}} {
		if want.d == nil || time.Duration(*want.d) != want.want {
			t.Errorf("service %s: healthcheck %s %v, want %v", svc.Name, what, want.d, want.want)
		}
	}
	if h.Retries == nil || *h.Retries != 8 {
		t.Errorf("service %s: healthcheck retries %v, want 8", svc.Name, h.Retries)
	}
}

// wantCommon checks what every lab service has: image, container name,
// network, secrets, restart, stop grace, deploy.
func wantCommon(t *testing.T, s Spec, svc types.ServiceConfig, image string, secrets []string) {
	t.Helper()
	if svc.Image != image {
		t.Errorf("service %s: image %q, want %q", svc.Name, svc.Image, image)
	}
	if want := s.Name + "-" + svc.Name; svc.ContainerName != want {
		t.Errorf("service %s: container_name %q, want %q", svc.Name, svc.ContainerName, want)
	}
	if _, ok := svc.Networks["lab"]; !ok || len(svc.Networks) != 1 {
		t.Errorf("service %s: networks %v, want only lab", svc.Name, svc.Networks)
	}
	var got []string
	for _, sec := range svc.Secrets {
		got = append(got, sec.Source)
	}
	if !slices.Equal(got, secrets) {
		t.Errorf("service %s: secrets %q, want %q", svc.Name, got, secrets)
	}
	if svc.Restart != "no" {
		t.Errorf("service %s: restart %q, want no", svc.Name, svc.Restart)
	}
	if svc.StopGracePeriod == nil || time.Duration(*svc.StopGracePeriod) != 5*time.Second {
		t.Errorf("service %s: stop_grace_period %v, want 5s", svc.Name, svc.StopGracePeriod)
	}
	d := svc.Deploy
	if d == nil || d.RestartPolicy == nil || d.RestartPolicy.Condition != "none" {
		t.Fatalf("service %s: deploy %+v, want restart_policy condition none", svc.Name, d)
	}
	if d.Replicas == nil || *d.Replicas != 1 {
		t.Errorf("service %s: deploy.replicas %v, want 1", svc.Name, d.Replicas)
	}
	// The service's labels (swarm) are the container's (compose).
	wantLabels(t, "service "+svc.Name+" deploy", d.Labels, svc.Labels)
}

func serviceNames(p *types.Project) []string {
	names := p.ServiceNames()
	slices.Sort(names)
	return names
}

func TestGenerateOneFabric(t *testing.T) {
	s := variants()["one-fabric"]
	p := loadLab(t, s, false)
	if want := []string{"fabric", "h0", "h1", "h2", "h3"}; !slices.Equal(serviceNames(p), want) {
		t.Fatalf("services %q, want %q", serviceNames(p), want)
	}
	if p.Name != s.Name {
		t.Errorf("project name %q, want %q", p.Name, s.Name)
	}
	fab := p.Services["fabric"]
	wantCommon(t, s, fab, "vcluster-lab:vct-one", []string{"vcluster-secret"})
	wantCmd := []string{"fabric", "--listen", "0.0.0.0:7400", "--api", "0.0.0.0:7401",
		"--secret-file", "/run/secrets/vcluster-secret", "--plane-speed", "1G"}
	if !slices.Equal(fab.Command, wantCmd) {
		t.Errorf("fabric command %q, want %q", fab.Command, wantCmd)
	}
	wantLabels(t, "fabric", fab.Labels, map[string]string{"vcluster.lab": "vct-one", "vcluster.role": "fabric"})
	if _, ok := fab.Labels["vcluster.plane"]; ok {
		t.Errorf("fabric: a plane label without fabric per plane: %v", fab.Labels)
	}
	if len(fab.Deploy.Placement.Constraints) != 0 {
		t.Errorf("fabric: placement %q, want none", fab.Deploy.Placement.Constraints)
	}
	wantHealth(t, fab, "http://127.0.0.1:7401/v1/health")
	for h := 0; h < 4; h++ {
		name := fmt.Sprintf("h%d", h)
		svc := p.Services[name]
		wantCommon(t, s, svc, "vcluster-lab:vct-one", []string{"vcluster-secret"})
		wantCmd := []string{"host", "--id", fmt.Sprint(h), "--fabric", "fabric:7400", "--secret-file", "/run/secrets/vcluster-secret",
			"--api", "0.0.0.0:7402", "--plane-speed", "1G"}
		if !slices.Equal(svc.Command, wantCmd) {
			t.Errorf("%s command %q, want %q", name, svc.Command, wantCmd)
		}
		wantLabels(t, name, svc.Labels, map[string]string{"vcluster.lab": "vct-one", "vcluster.role": "host", "vcluster.host": fmt.Sprint(h)})
		if deps := sortedKeys(svc.DependsOn); !slices.Equal(deps, []string{"fabric"}) {
			t.Errorf("%s depends_on %q, want [fabric]", name, deps)
		}
		wantHealth(t, svc, "http://127.0.0.1:7402/v1/health")
		if len(svc.CapAdd) != 0 || len(svc.Devices) != 0 || len(svc.Sysctls) != 0 || len(svc.Environment) != 0 {
			t.Errorf("%s: cap_add %q devices %v sysctls %v environment %v without TUN or memory limit", name, svc.CapAdd, svc.Devices, svc.Sysctls, svc.Environment)
		}
	}
	net, ok := p.Networks["lab"]
	if !ok || len(p.Networks) != 1 {
		t.Fatalf("networks %v, want only lab", p.Networks)
	}
	if net.Name != "vct-one-lab" || !net.Attachable || net.Driver != "" {
		t.Errorf("network lab: name %q attachable %v driver %q, want vct-one-lab, attachable, no driver", net.Name, net.Attachable, net.Driver)
	}
	wantLabels(t, "network lab", net.Labels, map[string]string{"vcluster.lab": "vct-one"})
	if len(p.Volumes) != 0 {
		t.Errorf("volumes %v without monitoring", p.Volumes)
	}
	if len(p.Secrets) != 1 {
		t.Errorf("secrets %v, want only vcluster-secret", p.Secrets)
	}
	sec := p.Secrets["vcluster-secret"]
	if want := filepath.Join(p.WorkingDir, "lab.secret"); sec.File != want {
		t.Errorf("secret file %q, want %q", sec.File, want)
	}
	wantLabels(t, "secret", sec.Labels, map[string]string{"vcluster.lab": "vct-one"})
}

func TestGenerateFabricPerPlane(t *testing.T) {
	s := variants()["fabric-per-plane"]
	p := loadLab(t, s, false)
	want := []string{"fabric-p0", "fabric-p1", "fabric-p2", "fabric-p3", "h0", "h1", "h2", "h3"}
	if !slices.Equal(serviceNames(p), want) {
		t.Fatalf("services %q, want %q", serviceNames(p), want)
	}
	for pl := 0; pl < 4; pl++ {
		name := fmt.Sprintf("fabric-p%d", pl)
		if FabricService(s, pl) != name {
			t.Errorf("FabricService(%d) = %q, want %q", pl, FabricService(s, pl), name)
		}
		fab := p.Services[name]
		wantCommon(t, s, fab, s.Image, []string{"vcluster-secret"})
		wantCmd := []string{"fabric", "--listen", "0.0.0.0:7400", "--api", "0.0.0.0:7401",
			"--secret-file", "/run/secrets/vcluster-secret", "--plane-speed", "1G", "--planes", fmt.Sprint(pl)}
		if !slices.Equal(fab.Command, wantCmd) {
			t.Errorf("%s command %q, want %q", name, fab.Command, wantCmd)
		}
		wantLabels(t, name, fab.Labels, map[string]string{"vcluster.lab": s.Name, "vcluster.role": "fabric", "vcluster.plane": fmt.Sprint(pl)})
		if c := fab.Deploy.Placement.Constraints; !slices.Equal(c, []string{fmt.Sprintf("node.labels.vcluster.plane == %d", pl)}) {
			t.Errorf("%s placement %q", name, c)
		}
		wantHealth(t, fab, "http://127.0.0.1:7401/v1/health")
	}
	for h := 0; h < 4; h++ {
		svc := p.Services[HostService(h)]
		if i := slices.Index(svc.Command, "--fabric"); i < 0 || svc.Command[i+1] != "fabric-p0:7400,fabric-p1:7400,fabric-p2:7400,fabric-p3:7400" {
			t.Errorf("%s command %q: --fabric is not every plane's fabric in plane order", svc.Name, svc.Command)
		}
		if deps := sortedKeys(svc.DependsOn); !slices.Equal(deps, want[:4]) {
			t.Errorf("%s depends_on %q, want %q", svc.Name, deps, want[:4])
		}
		if len(svc.Deploy.Placement.Constraints) != 0 {
			t.Errorf("%s: placement %q, want none", svc.Name, svc.Deploy.Placement.Constraints)
		}
	}
}

func TestGenerateConfigSetsTUN(t *testing.T) {
	s := variants()["config-sets-tun"]
	p := loadLab(t, s, false)
	extra := []string{"--config", "/run/secrets/vcluster-config", "--set", "fabric.loss=0.01", "--set", "x=$HOME ${Y}"}
	fab := p.Services["fabric"]
	wantCommon(t, s, fab, s.Image, []string{"vcluster-secret", "vcluster-config"})
	if got := fab.Command[len(fab.Command)-len(extra):]; !slices.Equal(got, extra) {
		t.Errorf("fabric command %q: does not end with %q (the $ must reach the process uninterpolated)", fab.Command, extra)
	}
	for h := 0; h < s.Hosts; h++ {
		svc := p.Services[HostService(h)]
		wantCommon(t, s, svc, s.Image, []string{"vcluster-secret", "vcluster-config"})
		wantCmd := append([]string{"host", "--id", fmt.Sprint(h), "--fabric", "fabric:7400", "--secret-file", "/run/secrets/vcluster-secret",
			"--api", "0.0.0.0:7402", "--plane-speed", "1G", "--tun-netns", "/proc/self/ns/net", "--tun-optional"}, extra...)
		if !slices.Equal(svc.Command, wantCmd) {
			t.Errorf("%s command %q, want %q", svc.Name, svc.Command, wantCmd)
		}
		if v := svc.Environment["GOMEMLIMIT"]; v == nil || *v != "256MiB" {
			t.Errorf("%s: GOMEMLIMIT %v, want 256MiB", svc.Name, v)
		}
		if !slices.Equal(svc.CapAdd, []string{"NET_ADMIN"}) {
			t.Errorf("%s: cap_add %q, want [NET_ADMIN]", svc.Name, svc.CapAdd)
		}
		if len(svc.Devices) != 1 || svc.Devices[0].Source != "/dev/net/tun" || svc.Devices[0].Target != "/dev/net/tun" {
			t.Errorf("%s: devices %+v, want /dev/net/tun:/dev/net/tun", svc.Name, svc.Devices)
		}
		if v, ok := svc.Sysctls["net.ipv6.conf.all.disable_ipv6"]; !ok || v != "0" {
			t.Errorf("%s: sysctls %v, want net.ipv6.conf.all.disable_ipv6=0", svc.Name, svc.Sysctls)
		}
	}
	if len(fab.CapAdd) != 0 || len(fab.Devices) != 0 {
		t.Errorf("fabric: cap_add %q devices %v: only hosts have a TUN", fab.CapAdd, fab.Devices)
	}
	cfg, ok := p.Secrets["vcluster-config"]
	if !ok || cfg.File != filepath.Join(p.WorkingDir, "lab.yaml") {
		t.Errorf("secret vcluster-config %+v, want file lab.yaml in the lab directory", cfg)
	}
	wantLabels(t, "secret vcluster-config", cfg.Labels, map[string]string{"vcluster.lab": s.Name})
}

func TestGenerateMonitoring(t *testing.T) {
	s := variants()["monitoring"]
	p := loadLab(t, s, false)
	want := []string{"fabric-p0", "fabric-p1", "grafana", "h0", "h1", "h2", "h3", "prometheus"}
	if !slices.Equal(serviceNames(p), want) {
		t.Fatalf("services %q, want %q", serviceNames(p), want)
	}
	prom := p.Services["prometheus"]
	wantCommon(t, s, prom, "prom/prometheus:v2", nil)
	wantLabels(t, "prometheus", prom.Labels, map[string]string{"vcluster.lab": s.Name, "vcluster.role": "prometheus"})
	var binds, named []string
	for _, v := range prom.Volumes {
		switch v.Type {
		case types.VolumeTypeBind:
			binds = append(binds, v.Source+":"+v.Target)
			if !v.ReadOnly {
				t.Errorf("prometheus: bind mount %s is not read-only", v.Source)
			}
		case types.VolumeTypeVolume:
			named = append(named, v.Source+":"+v.Target)
		}
	}
	if w := []string{filepath.Join(p.WorkingDir, "monitoring", "prometheus.yml") + ":/etc/prometheus/prometheus.yml"}; !slices.Equal(binds, w) {
		t.Errorf("prometheus bind mounts %q, want %q", binds, w)
	}
	if w := []string{"prometheus-data:/prometheus"}; !slices.Equal(named, w) {
		t.Errorf("prometheus volumes %q, want %q", named, w)
	}
	vol, ok := p.Volumes["prometheus-data"]
	if !ok || len(p.Volumes) != 1 {
		t.Fatalf("volumes %v, want only prometheus-data", p.Volumes)
	}
	wantLabels(t, "volume prometheus-data", vol.Labels, map[string]string{"vcluster.lab": s.Name})
	graf := p.Services["grafana"]
	wantCommon(t, s, graf, "grafana/grafana:11", nil)
	wantLabels(t, "grafana", graf.Labels, map[string]string{"vcluster.lab": s.Name, "vcluster.role": "grafana"})
	if deps := sortedKeys(graf.DependsOn); !slices.Equal(deps, []string{"prometheus"}) {
		t.Errorf("grafana depends_on %q", deps)
	}
	var targets []string
	for _, v := range graf.Volumes {
		targets = append(targets, v.Target)
		if v.Type != types.VolumeTypeBind || !v.ReadOnly || !strings.HasPrefix(v.Source, filepath.Join(p.WorkingDir, "monitoring")) {
			t.Errorf("grafana volume %+v: want a read-only bind mount from the lab's monitoring directory", v)
		}
	}
	if w := []string{"/etc/grafana/provisioning", "/var/lib/grafana/dashboards"}; !slices.Equal(targets, w) {
		t.Errorf("grafana mounts %q, want %q", targets, w)
	}
	for _, name := range []string{"prometheus", "grafana"} {
		if c := p.Services[name].Deploy.Placement.Constraints; !slices.Equal(c, []string{"node.role == manager"}) {
			t.Errorf("%s placement %q, want node.role == manager (its bind mounts are on the deploying manager)", name, c)
		}
		if len(p.Services[name].Ports) != 0 {
			t.Errorf("%s publishes ports %v", name, p.Services[name].Ports)
		}
	}
}

// TestComposeFileHasNoAbsoluteHostPath: the lab directory is the
// project directory; the file may move with it.
func TestComposeFileHasNoAbsoluteHostPath(t *testing.T) {
	for name, s := range variants() {
		files, err := Generate(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(files[ComposeFile], &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, key := range []string{"secrets", "volumes"} {
			m, _ := doc[key].(map[string]any)
			for k, v := range m {
				if f, _ := v.(map[string]any)["file"].(string); strings.HasPrefix(f, "/") {
					t.Errorf("%s: %s.%s.file %q is absolute", name, key, k, f)
				}
			}
		}
		services, _ := doc["services"].(map[string]any)
		for svcName, v := range services {
			vols, _ := v.(map[string]any)["volumes"].([]any)
			for _, vol := range vols {
				if s, _ := vol.(string); strings.HasPrefix(s, "/") {
					t.Errorf("%s: service %s mounts the absolute host path %q", name, svcName, s)
				}
			}
		}
		if !bytes.HasPrefix(files[ComposeFile], []byte("version: \"3.8\"\n")) {
			t.Errorf("%s: the file does not start with version: \"3.8\"", name)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	for name, s := range variants() {
		first, err := Generate(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := 0; i < 20; i++ {
			again, err := Generate(s)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(again) != len(first) {
				t.Fatalf("%s: %d files, then %d", name, len(first), len(again))
			}
			for path, b := range first {
				if !bytes.Equal(again[path], b) {
					t.Fatalf("%s: %s differs between two Generate calls of the same Spec:\n%s\n---\n%s", name, path, b, again[path])
				}
			}
		}
	}
}

func TestCheckRejects(t *testing.T) {
	for _, tc := range []struct {
		what   string
		change func(*Spec)
		want   string
	}{
		{"empty name", func(s *Spec) { s.Name = "" }, "--name"},
		{"long name", func(s *Spec) { s.Name = strings.Repeat("a", 41) }, "1..40"},
		{"upper name", func(s *Spec) { s.Name = "Lab" }, "--name"},
		{"name starts with -", func(s *Spec) { s.Name = "-lab" }, "starting with a letter or digit"},
		{"name with dot", func(s *Spec) { s.Name = "a.b" }, "a-z 0-9 _ -"},
		{"no image", func(s *Spec) { s.Image = "" }, "image: empty"},
		{"no hosts", func(s *Spec) { s.Hosts = 0 }, "hosts: 0 is out of range [1, 64]"},
		{"too many hosts", func(s *Spec) { s.Hosts = 65 }, "hosts: 65 is out of range [1, 64]"},
		{"no planes", func(s *Spec) { s.Planes = 0 }, "planes: 0 is out of range [1, 16]"},
		{"too many planes", func(s *Spec) { s.Planes = 17 }, "planes: 17 is out of range [1, 16]"},
		{"no plane speed", func(s *Spec) { s.PlaneSpeed = " " }, "plane-speed: empty"},
		{"no secret", func(s *Spec) { s.SecretSource = "" }, "secret: empty"},
		{"absolute secret", func(s *Spec) { s.SecretSource = "/etc/lab.secret" }, "secret: \"/etc/lab.secret\" is absolute"},
		{"secret outside", func(s *Spec) { s.SecretSource = "../lab.secret" }, "secret: \"../lab.secret\" is not a file inside the lab directory"},
		{"config without source", func(s *Spec) { s.Config = true }, "config: empty"},
		{"absolute config", func(s *Spec) { s.Config, s.ConfigSource = true, "/lab.yaml" }, "config: \"/lab.yaml\" is absolute"},
		{"empty set", func(s *Spec) { s.Sets = []string{"a=1", ""} }, "set: item 1: empty"},
		{"no prometheus image", func(s *Spec) { s.Monitoring = &Monitoring{GrafanaImage: "g"} }, "monitoring: prometheus image: empty"},
		{"no grafana image", func(s *Spec) { s.Monitoring = &Monitoring{PrometheusImage: "p"} }, "monitoring: grafana image: empty"},
	} {
		s := baseSpec("vct-check")
		tc.change(&s)
		err := s.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v, want an error with %q", tc.what, err, tc.want)
		}
		if _, gerr := Generate(s); gerr == nil {
			t.Errorf("%s: Generate accepted a spec Check rejects", tc.what)
		}
	}
	for name, s := range variants() {
		if err := s.Check(); err != nil {
			t.Errorf("%s: Check() = %v on a valid spec", name, err)
		}
	}
	for _, ok := range []string{"a", "0lab", "lab_1-x", strings.Repeat("z", 40)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v", ok, err)
		}
	}
}

// TestComposeTools: the compose tools read every generated variant.
func TestComposeTools(t *testing.T) {
	dc, dcErr := exec.LookPath("docker-compose")
	docker, dockerErr := exec.LookPath("docker")
	for name, s := range variants() {
		t.Run(name, func(t *testing.T) {
			dir := writeLab(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			t.Run("docker-compose", func(t *testing.T) {
				if dcErr != nil {
					t.Skip("docker-compose (1.29) is not installed: cannot check the file with it")
				}
				cmd := exec.CommandContext(ctx, dc, "-f", filepath.Join(dir, ComposeFile), "-p", s.Name, "config")
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("docker-compose config: %v\n%s", err, out)
				}
			})
			t.Run("docker stack config", func(t *testing.T) {
				if dockerErr != nil {
					t.Skip("the docker CLI is not installed: cannot check the file with docker stack config")
				}
				cmd := exec.CommandContext(ctx, docker, "stack", "config", "-c", filepath.Join(dir, ComposeFile))
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if err != nil && bytes.Contains(out, []byte("is not a docker command")) {
					t.Skipf("this docker CLI has no docker stack config: %s", out)
				}
				if err != nil {
					t.Fatalf("docker stack config: %v\n%s", err, out)
				}
			})
		})
	}
}
