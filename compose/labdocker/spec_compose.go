package labdocker

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The compose file as Generate writes it: structs (fields in file
// order) and maps (yaml sorts their keys), so that the same Spec gives
// the same bytes. Only what version 3.8 has and both docker-compose 1.29
// and docker stack deploy accept.

const composeVersion = "3.8"

const (
	networkKey     = "lab"
	secretKey      = "vcluster-secret"
	configKey      = "vcluster-config"
	prometheusData = "prometheus-data"
)

type composeDoc struct {
	Version  string                    `yaml:"version"`
	Services map[string]composeService `yaml:"services"`
	Networks map[string]composeNetwork `yaml:"networks"`
	Volumes  map[string]composeVolume  `yaml:"volumes,omitempty"`
	Secrets  map[string]composeSecret  `yaml:"secrets"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	ContainerName   string            `yaml:"container_name"`
	Command         []string          `yaml:"command,omitempty"`
	Environment     map[string]string `yaml:"environment,omitempty"`
	Labels          map[string]string `yaml:"labels"`
	Networks        []string          `yaml:"networks"`
	DependsOn       []string          `yaml:"depends_on,omitempty"`
	Secrets         []string          `yaml:"secrets,omitempty"`
	Volumes         []string          `yaml:"volumes,omitempty"`
	CapAdd          []string          `yaml:"cap_add,omitempty"`
	Devices         []string          `yaml:"devices,omitempty"`
	Sysctls         map[string]string `yaml:"sysctls,omitempty"`
	Healthcheck     *composeHealth    `yaml:"healthcheck,omitempty"`
	Restart         string            `yaml:"restart"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Deploy          composeDeploy     `yaml:"deploy"`
}

type composeHealth struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

type composeDeploy struct {
	Mode          string            `yaml:"mode"`
	Replicas      int               `yaml:"replicas"`
	Labels        map[string]string `yaml:"labels"`
	Placement     *composePlacement `yaml:"placement,omitempty"`
	RestartPolicy composeRestart    `yaml:"restart_policy"`
}

type composePlacement struct {
	Constraints []string `yaml:"constraints"`
}

type composeRestart struct {
	Condition string `yaml:"condition"`
}

type composeNetwork struct {
	Name       string            `yaml:"name"`
	Attachable bool              `yaml:"attachable"`
	Labels     map[string]string `yaml:"labels"`
}

type composeVolume struct {
	Labels map[string]string `yaml:"labels"`
}

type composeSecret struct {
	File   string            `yaml:"file"`
	Labels map[string]string `yaml:"labels"`
}

// Timings of every lab service's healthcheck. Each check is a docker
// exec of the 40 MB binary (runc, a new process): at a 2 s interval, 65
// containers ran 32 of them a second, which took most of a 2-core
// machine and starved a 64-host lab's collective. lab up waits on the
// APIs itself; the health is for docker ps, compose and a swarm. Retries
// × interval is still minutes, as a loaded machine starts dozens of
// containers at once.
var labHealth = composeHealth{Interval: "15s", Timeout: "5s", Retries: 8, StartPeriod: "5s"}

// ManagerConstraint pins a service to a swarm manager: the monitoring
// services bind-mount files of the lab directory, which exist on the
// manager that ran docker stack deploy.
const ManagerConstraint = "node.role == manager"

// PlaneConstraint pins plane p's fabric service to the swarm nodes
// labelled for it (docker node update --label-add vcluster.plane=P).
func PlaneConstraint(p int) string { return fmt.Sprintf("node.labels.%s == %d", PlaneLabel, p) }

// escape keeps a value out of compose interpolation: compose and
// docker stack both expand $VAR in every string of the file.
func escape(v string) string { return strings.ReplaceAll(v, "$", "$$") }

func escapeAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = escape(v)
	}
	return out
}

// labLabels are s's labels plus kv pairs.
func labLabels(s Spec, kv ...string) map[string]string {
	m := map[string]string{LabLabel: s.Name}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// copyLabels: container labels and deploy labels must not share a map
// (yaml would write an anchor and alias).
func copyLabels(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// configArgs are the arguments every lab process gets for the config
// copy and the --set values.
func configArgs(s Spec) []string {
	var args []string
	if s.Config {
		args = append(args, "--config", ConfigPath)
	}
	for _, v := range s.Sets {
		args = append(args, "--set", v)
	}
	return args
}

// labSecrets are the secrets every lab process mounts.
func labSecrets(s Spec) []string {
	if s.Config {
		return []string{secretKey, configKey}
	}
	return []string{secretKey}
}

// labService is what every lab service has.
func labService(s Spec, service string, labels map[string]string, command []string, healthURL string) composeService {
	h := labHealth
	h.Test = []string{"CMD", BinaryPath, "healthcheck", healthURL}
	return composeService{
		Image:           s.Image,
		ContainerName:   ContainerName(s.Name, service),
		Command:         escapeAll(command),
		Labels:          labels,
		Networks:        []string{networkKey},
		Secrets:         labSecrets(s),
		Healthcheck:     &h,
		Restart:         "no",
		StopGracePeriod: "5s",
		Deploy: composeDeploy{
			Mode: "replicated", Replicas: 1,
			Labels:        copyLabels(labels),
			RestartPolicy: composeRestart{Condition: "none"},
		},
	}
}

// FabricCommand is the command of plane p's fabric service (p is
// ignored without FabricPerPlane).
func FabricCommand(s Spec, p int) []string {
	cmd := []string{"fabric", "--listen", fmt.Sprintf("0.0.0.0:%d", FabricTunnelPort),
		"--api", fmt.Sprintf("0.0.0.0:%d", FabricAPIPort), "--secret-file", SecretPath, "--plane-speed", s.PlaneSpeed}
	if s.FabricPerPlane {
		cmd = append(cmd, "--planes", strconv.Itoa(p))
	}
	return append(cmd, configArgs(s)...)
}

// FabricAddrs is a host's --fabric: the fabric's tunnel address, or one
// per plane, in plane order, comma-separated.
func FabricAddrs(s Spec) string {
	var addrs []string
	for _, f := range fabricServices(s) {
		addrs = append(addrs, fmt.Sprintf("%s:%d", f, FabricTunnelPort))
	}
	return strings.Join(addrs, ",")
}

// HostCommand is host h's command.
func HostCommand(s Spec, h int) []string {
	cmd := []string{"host", "--id", strconv.Itoa(h), "--fabric", FabricAddrs(s), "--secret-file", SecretPath,
		"--api", fmt.Sprintf("0.0.0.0:%d", HostAPIPort), "--plane-speed", s.PlaneSpeed}
	if s.TUN {
		cmd = append(cmd, "--tun-netns", "/proc/self/ns/net", "--tun-optional")
	}
	return append(cmd, configArgs(s)...)
}

func healthURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d/v1/health", port) }

func composeFile(s Spec) composeDoc {
	doc := composeDoc{
		Version:  composeVersion,
		Services: map[string]composeService{},
		Networks: map[string]composeNetwork{networkKey: {Name: NetworkName(s.Name), Attachable: true, Labels: labLabels(s)}},
		Secrets:  map[string]composeSecret{secretKey: {File: relSource(s.SecretSource), Labels: labLabels(s)}},
	}
	if s.Config {
		doc.Secrets[configKey] = composeSecret{File: relSource(s.ConfigSource), Labels: labLabels(s)}
	}
	fabrics := fabricServices(s)
	for p, name := range fabrics {
		labels := labLabels(s, RoleLabel, "fabric")
		if s.FabricPerPlane {
			labels[PlaneLabel] = strconv.Itoa(p)
		}
		svc := labService(s, name, labels, FabricCommand(s, p), healthURL(FabricAPIPort))
		if s.FabricPerPlane {
			svc.Deploy.Placement = &composePlacement{Constraints: []string{PlaneConstraint(p)}}
		}
		doc.Services[name] = svc
	}
	for h := 0; h < s.Hosts; h++ {
		name := HostService(h)
		labels := labLabels(s, RoleLabel, "host", HostLabel, strconv.Itoa(h))
		svc := labService(s, name, labels, HostCommand(s, h), healthURL(HostAPIPort))
		svc.DependsOn = fabrics
		if s.HostMemLimit != "" {
			svc.Environment = map[string]string{"GOMEMLIMIT": escape(s.HostMemLimit)}
		}
		if s.TUN {
			svc.CapAdd = []string{"NET_ADMIN"}
			svc.Devices = []string{"/dev/net/tun:/dev/net/tun"}
			// Docker turns IPv6 off in a container on an IPv4-only
			// network; ping -6 over the TUN needs it on.
			svc.Sysctls = map[string]string{"net.ipv6.conf.all.disable_ipv6": "0", "net.ipv6.conf.default.disable_ipv6": "0"}
		}
		doc.Services[name] = svc
	}
	if s.Monitoring != nil {
		addMonitoringServices(s, &doc)
	}
	return doc
}

// marshalYAML writes v with two-space indents (what compose files look
// like).
func marshalYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
