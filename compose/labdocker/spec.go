package labdocker

import (
	"context"
	"errors"

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

// CheckName validates a lab name: 1..40 of a-z 0-9 - _, starting with a
// letter or digit (a compose project name, and a prefix of container
// names).
func CheckName(name string) error { return errors.New("labdocker.CheckName: not implemented yet") }

// ImageRef is the image a lab called name runs: one per lab, so that
// lab down --rmi removes exactly it.
func ImageRef(name string) string { return "vcluster-lab:" + name }

// FabricService is the fabric service that runs plane p ("fabric", or
// "fabric-pP" with FabricPerPlane).
func FabricService(s Spec, p int) string { panic("not implemented yet") }

// HostService is host h's service name ("h0", …), its container is
// Name-hH.
func HostService(h int) string { panic("not implemented yet") }

// ContainerName is service's container name in lab name.
func ContainerName(name, service string) string { return name + "-" + service }

// Generate returns the files of s's lab, by path relative to the lab's
// directory (ComposeFile always; the monitoring files with Monitoring).
// s is checked first (Check).
func Generate(s Spec) (map[string][]byte, error) {
	return nil, errors.New("labdocker.Generate: not implemented yet")
}

// Check validates s: every problem names the field.
func (s Spec) Check() error { return errors.New("labdocker.Spec.Check: not implemented yet") }

// Load reads dir's compose file back with compose-go as the compose tool
// would (project name given; swarm: as docker stack deploy reads it,
// with the swarm profile's rules), and returns the project or what is
// wrong with it.
func Load(ctx context.Context, dir, project string, swarm bool) (*types.Project, error) {
	return nil, errors.New("labdocker.Load: not implemented yet")
}
