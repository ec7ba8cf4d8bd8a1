package labdocker

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// Labels on everything a lab creates (containers, networks, volumes, the
// image): LabLabel's value is the lab's name; that is how lab down finds
// exactly what a lab made.
const (
	LabLabel   = "vcluster.lab"
	RoleLabel  = "vcluster.role"  // "fabric", "host", "prometheus", "grafana"
	HostLabel  = "vcluster.host"  // a host container's host id
	PlaneLabel = "vcluster.plane" // a per-plane fabric's plane
)

// Ports the lab's processes listen on inside their containers (every
// container has its own address on the lab network).
const (
	FabricTunnelPort = 7400 // UDP: the hosts' tunnels
	FabricAPIPort    = 7401 // HTTP: /v1/status, /v1/health, /metrics, …
	HostAPIPort      = 7402 // HTTP: /v1/health, /v1/collectives, /metrics, …
	HostTunnelPort   = 7403 // UDP: the host's end of its tunnels
	PrometheusPort   = 9090
	GrafanaPort      = 3000
)

// In-container paths.
const (
	BinaryPath = "/vcluster"                    // the static vcluster binary
	SecretPath = "/run/secrets/vcluster-secret" // the lab secret (a compose secret)
	ConfigPath = "/run/secrets/vcluster-config" // the lab config copy, when there is one (a compose secret)
)

// Files Generate writes, relative to the lab's directory.
const (
	ComposeFile       = "docker-compose.yml"
	PrometheusFile    = "monitoring/prometheus.yml"
	GrafanaDatasource = "monitoring/grafana/provisioning/datasources/vcluster.yml"
	GrafanaDashboards = "monitoring/grafana/provisioning/dashboards/vcluster.yml"
	GrafanaDashboard  = "monitoring/grafana/dashboards/vcluster.json"
)

// Spec is a lab as its compose file describes it.
type Spec struct {
	// Name is the lab's name: the compose project, the value of
	// LabLabel, the prefix of container names (CheckName).
	Name string
	// Image is the vcluster image every lab service runs (ImageRef).
	Image string
	// Hosts is the number of host services (h0 … h{Hosts-1}); Planes the
	// config's planes.
	Hosts, Planes int
	// FabricPerPlane runs one fabric service per plane (fabric-p0, …),
	// each with --planes P; otherwise one service "fabric" runs them all.
	FabricPerPlane bool
	// PlaneSpeed is every process's --plane-speed (e.g. "1G").
	PlaneSpeed string
	// Sets are the --set values every process gets, in order; Config,
	// when true, means the lab has a config file copy (ConfigSource,
	// relative to the lab directory) mounted as a secret at ConfigPath.
	Sets         []string
	Config       bool
	ConfigSource string
	// SecretSource is the secret file, relative to the lab directory.
	SecretSource string
	// HostMemLimit is the host containers' GOMEMLIMIT ("" for none).
	HostMemLimit string
	// TUN gives each host a TUN device in its container's network
	// namespace (the container needs /dev/net/tun and NET_ADMIN).
	TUN bool
	// Monitoring, when not nil, adds prometheus and grafana services.
	Monitoring *Monitoring
}

// Monitoring names the images of the monitoring services (images that
// exist locally: FindImage).
type Monitoring struct {
	PrometheusImage, GrafanaImage string
}

// Limits Check enforces.
const (
	MaxNameLen = 40
	MaxHosts   = 64
	MaxPlanes  = 16
)

// nameRule is a lab name: a compose project name that also prefixes
// container, network and volume names.
var nameRule = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// CheckName validates a lab name: 1..40 of a-z 0-9 - _, starting with a
// letter or digit (a compose project name, and a prefix of container
// names).
func CheckName(name string) error {
	if len(name) < 1 || len(name) > MaxNameLen || !nameRule.MatchString(name) {
		return fmt.Errorf("--name: %q is not a lab name (1..%d of a-z 0-9 _ -, starting with a letter or digit)", name, MaxNameLen)
	}
	return nil
}

// ImageRef is the image a lab called name runs: one per lab, so that
// lab down --rmi removes exactly it.
func ImageRef(name string) string { return "vcluster-lab:" + name }

// FabricService is the fabric service that runs plane p ("fabric", or
// "fabric-pP" with FabricPerPlane).
func FabricService(s Spec, p int) string {
	if s.FabricPerPlane {
		return fmt.Sprintf("fabric-p%d", p)
	}
	return "fabric"
}

// fabricServices are s's fabric services in plane order (one without
// FabricPerPlane).
func fabricServices(s Spec) []string {
	if !s.FabricPerPlane {
		return []string{FabricService(s, 0)}
	}
	names := make([]string, s.Planes)
	for p := range names {
		names[p] = FabricService(s, p)
	}
	return names
}

// HostService is host h's service name ("h0", …), its container is
// Name-hH.
func HostService(h int) string { return fmt.Sprintf("h%d", h) }

// ContainerName is service's container name in lab name.
func ContainerName(name, service string) string { return name + "-" + service }

// NetworkName is the lab network's name (explicit in the compose file,
// so that it is the same under compose and swarm and a test can
// docker run --network it).
func NetworkName(name string) string { return name + "-lab" }

// Check validates s: every problem names the field.
func (s Spec) Check() error {
	if err := CheckName(s.Name); err != nil {
		return err
	}
	if strings.TrimSpace(s.Image) == "" {
		return fmt.Errorf("image: empty (the lab's vcluster image, e.g. %s)", ImageRef(s.Name))
	}
	if s.Hosts < 1 || s.Hosts > MaxHosts {
		return fmt.Errorf("hosts: %d is out of range [1, %d]", s.Hosts, MaxHosts)
	}
	if s.Planes < 1 || s.Planes > MaxPlanes {
		return fmt.Errorf("planes: %d is out of range [1, %d]", s.Planes, MaxPlanes)
	}
	if strings.TrimSpace(s.PlaneSpeed) == "" {
		return fmt.Errorf("plane-speed: empty (a speed such as 1G)")
	}
	if err := checkSource("secret", s.SecretSource); err != nil {
		return err
	}
	if s.Config {
		if err := checkSource("config", s.ConfigSource); err != nil {
			return err
		}
	}
	for i, v := range s.Sets {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("set: item %d: empty (KEY=VALUE)", i)
		}
	}
	if m := s.Monitoring; m != nil {
		if strings.TrimSpace(m.PrometheusImage) == "" {
			return fmt.Errorf("monitoring: prometheus image: empty (an image that exists locally, e.g. prom/prometheus)")
		}
		if strings.TrimSpace(m.GrafanaImage) == "" {
			return fmt.Errorf("monitoring: grafana image: empty (an image that exists locally, e.g. grafana/grafana)")
		}
	}
	return nil
}

// checkSource checks a file the compose file names: relative to the lab
// directory (the compose project directory) and inside it, since the
// file must not carry an absolute host path.
func checkSource(field, src string) error {
	switch {
	case strings.TrimSpace(src) == "":
		return fmt.Errorf("%s: empty (a file relative to the lab directory)", field)
	case filepath.IsAbs(src) || path.IsAbs(filepath.ToSlash(src)):
		return fmt.Errorf("%s: %q is absolute (it must be relative to the lab directory)", field, src)
	}
	if c := path.Clean(filepath.ToSlash(src)); c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("%s: %q is not a file inside the lab directory", field, src)
	}
	return nil
}

// relSource is src as the compose file spells it: "./" and slashes.
func relSource(src string) string { return "./" + path.Clean(filepath.ToSlash(src)) }

// Generate returns the files of s's lab, by path relative to the lab's
// directory (ComposeFile always; the monitoring files with Monitoring).
// s is checked first (Check).
func Generate(s Spec) (map[string][]byte, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	compose, err := marshalYAML(composeFile(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ComposeFile, err)
	}
	files := map[string][]byte{ComposeFile: compose}
	if s.Monitoring != nil {
		if err := addMonitoringFiles(s, files); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// Load reads dir's compose file back with compose-go as the compose tool
// would (project name given; swarm: as docker stack deploy reads it,
// with the swarm profile's rules), and returns the project or what is
// wrong with it.
func Load(ctx context.Context, dir, project string, swarm bool) (*types.Project, error) {
	return load(ctx, dir, project, swarm)
}
