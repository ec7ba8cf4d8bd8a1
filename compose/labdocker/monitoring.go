package labdocker

import (
	_ "embed"
	"fmt"
)

// The monitoring services: Prometheus scrapes every lab process's
// /metrics by service name on the lab network, Grafana shows them. Their
// files are bind-mounted read-only from the lab directory (./monitoring):
// docker-compose 1.29 ignores top-level configs, and a bind mount is what
// both compose tools serve. No port is published: each lab would
// otherwise need its own host ports, and a swarm publishes on every
// node's every address; on Linux the lab's containers' addresses are
// reachable from the host.

// GrafanaDashboardJSON is the lab's Grafana dashboard, installed as
// GrafanaDashboard.
//
//go:embed grafana-dashboard.json
var GrafanaDashboardJSON []byte

const (
	PrometheusService = "prometheus"
	GrafanaService    = "grafana"
)

// Scrape jobs of PrometheusFile.
const (
	FabricJob = "vcluster-fabric"
	HostJob   = "vcluster-host"
)

// ScrapeInterval is Prometheus's scrape and evaluation interval: short,
// since labs are short-lived.
const ScrapeInterval = "2s"

// In-container paths of the monitoring files.
const (
	prometheusConfigPath = "/etc/prometheus/prometheus.yml"
	prometheusDataPath   = "/prometheus"
	grafanaProvisioning  = "/etc/grafana/provisioning"
	grafanaDashboardsDir = "/var/lib/grafana/dashboards"
)

// PrometheusURL is Prometheus's address on the lab network (Grafana's
// datasource).
var PrometheusURL = fmt.Sprintf("http://%s:%d", PrometheusService, PrometheusPort)

func addMonitoringServices(s Spec, doc *composeDoc) {
	m := s.Monitoring
	monitoring := func(image, service, role string) composeService {
		labels := labLabels(s, RoleLabel, role)
		return composeService{
			Image:           image,
			ContainerName:   ContainerName(s.Name, service),
			Labels:          labels,
			Networks:        []string{networkKey},
			Restart:         "no",
			StopGracePeriod: "5s",
			Deploy: composeDeploy{
				Mode: "replicated", Replicas: 1,
				Labels:        copyLabels(labels),
				Placement:     &composePlacement{Constraints: []string{ManagerConstraint}},
				RestartPolicy: composeRestart{Condition: "none"},
			},
		}
	}
	prom := monitoring(m.PrometheusImage, PrometheusService, "prometheus")
	// The command is explicit, not the image's default, so that the
	// config and TSDB paths are the ones mounted whatever image it is
	// (the official image's entrypoint is the prometheus binary).
	prom.Command = []string{"--config.file=" + prometheusConfigPath, "--storage.tsdb.path=" + prometheusDataPath}
	prom.Volumes = []string{
		"./" + PrometheusFile + ":" + prometheusConfigPath + ":ro",
		prometheusData + ":" + prometheusDataPath,
	}
	graf := monitoring(m.GrafanaImage, GrafanaService, "grafana")
	graf.DependsOn = []string{PrometheusService}
	graf.Environment = map[string]string{
		// A lab is a local testbed: anonymous viewers, no login to see
		// the dashboard (admin/admin still edits).
		"GF_AUTH_ANONYMOUS_ENABLED":  "true",
		"GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer",
		"GF_PATHS_PROVISIONING":      grafanaProvisioning,
	}
	graf.Volumes = []string{
		"./monitoring/grafana/provisioning:" + grafanaProvisioning + ":ro",
		"./monitoring/grafana/dashboards:" + grafanaDashboardsDir + ":ro",
	}
	doc.Services[PrometheusService] = prom
	doc.Services[GrafanaService] = graf
	doc.Volumes = map[string]composeVolume{prometheusData: {Labels: labLabels(s)}}
}

// Prometheus's config, as much of it as the lab writes.
type promConfig struct {
	Global        promGlobal   `yaml:"global"`
	ScrapeConfigs []promScrape `yaml:"scrape_configs"`
}

type promGlobal struct {
	ScrapeInterval     string `yaml:"scrape_interval"`
	ScrapeTimeout      string `yaml:"scrape_timeout"`
	EvaluationInterval string `yaml:"evaluation_interval"`
}

type promScrape struct {
	JobName       string        `yaml:"job_name"`
	MetricsPath   string        `yaml:"metrics_path"`
	StaticConfigs []promTargets `yaml:"static_configs"`
}

type promTargets struct {
	Targets []string          `yaml:"targets"`
	Labels  map[string]string `yaml:"labels"`
}

// promLabLabel is the lab's name on every target: Prometheus label
// names have no dots (LabLabel's "vcluster.lab" is rejected).
const promLabLabel = "lab"

// prometheusConfig scrapes every fabric service and every host by
// service name (the lab network's DNS), one static group per service so
// that each target carries its lab, service, plane and host labels.
func prometheusConfig(s Spec) promConfig {
	fabric := promScrape{JobName: FabricJob, MetricsPath: "/metrics"}
	for p, name := range fabricServices(s) {
		labels := map[string]string{promLabLabel: s.Name, "service": name}
		if s.FabricPerPlane {
			labels["plane"] = fmt.Sprint(p)
		}
		fabric.StaticConfigs = append(fabric.StaticConfigs, promTargets{
			Targets: []string{fmt.Sprintf("%s:%d", name, FabricAPIPort)}, Labels: labels})
	}
	host := promScrape{JobName: HostJob, MetricsPath: "/metrics"}
	for h := 0; h < s.Hosts; h++ {
		name := HostService(h)
		host.StaticConfigs = append(host.StaticConfigs, promTargets{
			Targets: []string{fmt.Sprintf("%s:%d", name, HostAPIPort)},
			Labels:  map[string]string{promLabLabel: s.Name, "service": name, "host": fmt.Sprint(h)}})
	}
	return promConfig{
		Global:        promGlobal{ScrapeInterval: ScrapeInterval, ScrapeTimeout: ScrapeInterval, EvaluationInterval: ScrapeInterval},
		ScrapeConfigs: []promScrape{fabric, host},
	}
}

// Grafana provisioning files (apiVersion 1).
type grafanaDatasources struct {
	APIVersion  int                 `yaml:"apiVersion"`
	Datasources []grafanaDatasource `yaml:"datasources"`
}

type grafanaDatasource struct {
	Name      string            `yaml:"name"`
	Type      string            `yaml:"type"`
	UID       string            `yaml:"uid"`
	Access    string            `yaml:"access"`
	URL       string            `yaml:"url"`
	IsDefault bool              `yaml:"isDefault"`
	Editable  bool              `yaml:"editable"`
	JSONData  map[string]string `yaml:"jsonData"`
}

type grafanaProviders struct {
	APIVersion int               `yaml:"apiVersion"`
	Providers  []grafanaProvider `yaml:"providers"`
}

type grafanaProvider struct {
	Name                  string            `yaml:"name"`
	OrgID                 int               `yaml:"orgId"`
	Folder                string            `yaml:"folder"`
	Type                  string            `yaml:"type"`
	DisableDeletion       bool              `yaml:"disableDeletion"`
	AllowUIUpdates        bool              `yaml:"allowUiUpdates"`
	UpdateIntervalSeconds int               `yaml:"updateIntervalSeconds"`
	Options               map[string]string `yaml:"options"`
}

// GrafanaDatasourceUID is the Prometheus datasource's uid (what the
// dashboard's panels may name).
const GrafanaDatasourceUID = "vcluster-prometheus"

func addMonitoringFiles(s Spec, files map[string][]byte) error {
	docs := map[string]any{
		PrometheusFile: prometheusConfig(s),
		GrafanaDatasource: grafanaDatasources{APIVersion: 1, Datasources: []grafanaDatasource{{
			Name: "Prometheus", Type: "prometheus", UID: GrafanaDatasourceUID, Access: "proxy",
			URL: PrometheusURL, IsDefault: true, JSONData: map[string]string{"timeInterval": ScrapeInterval},
		}}},
		GrafanaDashboards: grafanaProviders{APIVersion: 1, Providers: []grafanaProvider{{
			Name: "vcluster", OrgID: 1, Folder: "vcluster", Type: "file", UpdateIntervalSeconds: 10,
			Options: map[string]string{"path": grafanaDashboardsDir},
		}}},
	}
	for name, doc := range docs {
		b, err := marshalYAML(doc)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		files[name] = b
	}
	files[GrafanaDashboard] = GrafanaDashboardJSON
	return nil
}
