package labdocker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func monitoringFiles(t *testing.T, s Spec) map[string][]byte {
	t.Helper()
	files, err := Generate(s)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	for _, name := range []string{ComposeFile, PrometheusFile, GrafanaDatasource, GrafanaDashboards, GrafanaDashboard} {
		if _, ok := files[name]; !ok {
			t.Fatalf("Generate wrote no %s (files %v)", name, sortedKeys(files))
		}
	}
	return files
}

// TestPrometheusConfig: every fabric service and every host is a target
// of its job, by service name.
func TestPrometheusConfig(t *testing.T) {
	for _, perPlane := range []bool{false, true} {
		s := baseSpec("vct-prom")
		s.Planes, s.FabricPerPlane = 3, perPlane
		s.Monitoring = &Monitoring{PrometheusImage: "p", GrafanaImage: "g"}
		files := monitoringFiles(t, s)
		var cfg struct {
			Global struct {
				ScrapeInterval string `yaml:"scrape_interval"`
			} `yaml:"global"`
			ScrapeConfigs []struct {
				JobName       string `yaml:"job_name"`
				StaticConfigs []struct {
					Targets []string          `yaml:"targets"`
					Labels  map[string]string `yaml:"labels"`
				} `yaml:"static_configs"`
			} `yaml:"scrape_configs"`
		}
		if err := yaml.Unmarshal(files[PrometheusFile], &cfg); err != nil {
			t.Fatalf("%s does not parse: %v\n%s", PrometheusFile, err, files[PrometheusFile])
		}
		if cfg.Global.ScrapeInterval != "2s" {
			t.Errorf("scrape_interval %q, want 2s", cfg.Global.ScrapeInterval)
		}
		targets := map[string][]string{}
		for _, sc := range cfg.ScrapeConfigs {
			for _, st := range sc.StaticConfigs {
				targets[sc.JobName] = append(targets[sc.JobName], st.Targets...)
				if st.Labels["lab"] != s.Name {
					t.Errorf("job %s targets %q: label lab = %q, want %q", sc.JobName, st.Targets, st.Labels["lab"], s.Name)
				}
			}
		}
		wantFabric := []string{"fabric:7401"}
		if perPlane {
			wantFabric = []string{"fabric-p0:7401", "fabric-p1:7401", "fabric-p2:7401"}
		}
		if !slices.Equal(targets["vcluster-fabric"], wantFabric) {
			t.Errorf("per plane %v: vcluster-fabric targets %q, want %q", perPlane, targets["vcluster-fabric"], wantFabric)
		}
		var wantHosts []string
		for h := 0; h < s.Hosts; h++ {
			wantHosts = append(wantHosts, fmt.Sprintf("h%d:7402", h))
		}
		if !slices.Equal(targets["vcluster-host"], wantHosts) {
			t.Errorf("vcluster-host targets %q, want %q", targets["vcluster-host"], wantHosts)
		}
		if len(targets) != 2 {
			t.Errorf("jobs %v, want vcluster-fabric and vcluster-host", sortedKeys(targets))
		}
	}
}

// TestPromtool: Prometheus itself accepts the config (Debian package
// prometheus).
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus): cannot check prometheus.yml with Prometheus")
	}
	s := baseSpec("vct-promtool")
	s.FabricPerPlane = true
	s.Monitoring = &Monitoring{PrometheusImage: "p", GrafanaImage: "g"}
	dir := t.TempDir()
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, monitoringFiles(t, s)[PrometheusFile], 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, promtool, "check", "config", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	s := baseSpec("vct-grafana")
	s.Monitoring = &Monitoring{PrometheusImage: "p", GrafanaImage: "g"}
	files := monitoringFiles(t, s)
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, Type, URL, Access string
			IsDefault               bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(files[GrafanaDatasource], &ds); err != nil {
		t.Fatalf("%s does not parse: %v", GrafanaDatasource, err)
	}
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" ||
		ds.Datasources[0].URL != "http://prometheus:9090" || !ds.Datasources[0].IsDefault {
		t.Errorf("datasources %+v, want apiVersion 1 and one default prometheus at http://prometheus:9090", ds)
	}
	var dash struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Type string
			Options    map[string]string `yaml:"options"`
		} `yaml:"providers"`
	}
	if err := yaml.Unmarshal(files[GrafanaDashboards], &dash); err != nil {
		t.Fatalf("%s does not parse: %v", GrafanaDashboards, err)
	}
	if dash.APIVersion != 1 || len(dash.Providers) != 1 || dash.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers %+v, want apiVersion 1 and one file provider", dash)
	}
	// The provider's path is where the compose file mounts the
	// directory that holds vcluster.json.
	var compose struct {
		Services map[string]struct {
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(files[ComposeFile], &compose); err != nil {
		t.Fatal(err)
	}
	mount := "./" + filepath.ToSlash(filepath.Dir(GrafanaDashboard)) + ":" + dash.Providers[0].Options["path"] + ":ro"
	if !slices.Contains(compose.Services["grafana"].Volumes, mount) {
		t.Errorf("grafana volumes %q: no %q (the provider's path would be empty)", compose.Services["grafana"].Volumes, mount)
	}
	if filepath.Base(GrafanaDashboard) != "vcluster.json" {
		t.Errorf("dashboard file %s, want vcluster.json", GrafanaDashboard)
	}
	if !bytes.Equal(files[GrafanaDashboard], GrafanaDashboardJSON) {
		t.Errorf("%s is not the embedded dashboard", GrafanaDashboard)
	}
	if len(GrafanaDashboardJSON) == 0 {
		t.Errorf("the embedded dashboard is empty")
	}
}

func TestNoMonitoringFilesWithoutMonitoring(t *testing.T) {
	files, err := Generate(baseSpec("vct-nomon"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[ComposeFile] == nil {
		t.Errorf("files %v, want only %s", sortedKeys(files), ComposeFile)
	}
}
