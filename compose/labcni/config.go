package labcni

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/units"
)

// Defaults of the optional network-config fields.
const (
	DefaultStateDir   = "/run/vcluster-cni"
	DefaultPlaneSpeed = "1G"
	DefaultTimeout    = 30 * time.Second
	MinTimeout        = time.Second
	MaxTimeout        = 10 * time.Minute
	// HostArg is the CNI_ARGS key that picks the host id.
	HostArg = "VCLUSTER_HOST"
)

// NetConf is the plugin's network configuration (stdin).
type NetConf struct {
	types.PluginConf
	// Vcluster is the vcluster binary (default: "vcluster" in PATH).
	Vcluster string `json:"vcluster"`
	// Fabric is the fabric's tunnel address (host:port); "" = the
	// "listen" the fabric API reports.
	Fabric string `json:"fabric"`
	// FabricAPI is the fabric's HTTP API (host:port), required.
	FabricAPI string `json:"fabricApi"`
	// SecretFile is the lab's secret, required (the fabric's).
	SecretFile string `json:"secretFile"`
	// LabConfig is the lab config file (--config), "" = none.
	LabConfig string `json:"labConfig"`
	// Sets are the config overrides (--set k=v), the fabric's own.
	Sets []string `json:"sets"`
	// PlaneSpeed is the host-link speed per plane (--plane-speed).
	PlaneSpeed string `json:"planeSpeed"`
	// StateDir holds the attachments' records, ready files and logs.
	StateDir string `json:"stateDir"`
	// Timeout bounds a host's start until it is up (Go duration).
	Timeout string `json:"timeout"`

	timeout time.Duration
	// hasValidAttachments is whether the GC list was given at all (an
	// absent list is not an empty one: GC then removes nothing).
	hasValidAttachments bool
}

// configError is the CNI error for a bad field: code 7, with the
// field's name, the reason and what is allowed.
func configError(field, format string, a ...any) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig,
		fmt.Sprintf("%s: %s", field, fmt.Sprintf(format, a...)), "")
}

// ParseConfig decodes and validates a network config: every field's
// syntax and range; files are checked by CheckFiles (a DEL must work
// after they are gone).
func ParseConfig(stdin []byte) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(stdin, c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network config: not JSON of vcluster-cni: "+err.Error(), "")
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(stdin, &raw) == nil {
		_, c.hasValidAttachments = raw["cni.dev/valid-attachments"]
	}
	if c.Fabric != "" {
		if err := checkHostPort(c.Fabric, false); err != nil {
			return nil, configError("fabric", "%q: %v; must be host:port of the fabric's tunnel (port 1..65535), or empty for the one fabricApi reports", c.Fabric, err)
		}
	}
	if c.FabricAPI == "" {
		return nil, configError("fabricApi", "required; the fabric's HTTP API as host:port (port 1..65535)")
	}
	if err := checkHostPort(c.FabricAPI, false); err != nil {
		return nil, configError("fabricApi", "%q: %v; must be host:port (port 1..65535)", c.FabricAPI, err)
	}
	if c.SecretFile == "" {
		return nil, configError("secretFile", "required; the lab's secret file (the fabric's --secret-file)")
	}
	for i, s := range c.Sets {
		k, _, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, configError(fmt.Sprintf("sets[%d]", i), "%q is not key=value (e.g. fabric.hosts=2)", s)
		}
	}
	if c.PlaneSpeed == "" {
		c.PlaneSpeed = DefaultPlaneSpeed
	}
	allowed := fmt.Sprintf("a speed in [%s, %s] (e.g. 100M, 1G)", units.FormatSpeed(labspec.MinPlaneBps), units.FormatSpeed(labspec.MaxPlaneBps))
	bps, err := units.ParseSpeed(c.PlaneSpeed)
	if err != nil {
		return nil, configError("planeSpeed", "%q is not a speed; must be %s", c.PlaneSpeed, allowed)
	}
	if bps < labspec.MinPlaneBps || bps > labspec.MaxPlaneBps {
		return nil, configError("planeSpeed", "%q is out of range; must be %s", c.PlaneSpeed, allowed)
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if !filepath.IsAbs(c.StateDir) {
		return nil, configError("stateDir", "%q is not an absolute path; must be a directory's absolute path (default %s)", c.StateDir, DefaultStateDir)
	}
	c.timeout = DefaultTimeout
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d < MinTimeout || d > MaxTimeout {
			return nil, configError("timeout", "%q: must be a duration in [%v, %v] (e.g. 30s)", c.Timeout, MinTimeout, MaxTimeout)
		}
		c.timeout = d
	}
	return c, nil
}

// CheckFiles checks the fields naming files and programs, which ADD and
// CHECK need to exist.
func (c *NetConf) CheckFiles() error {
	if c.Vcluster == "" {
		p, err := exec.LookPath("vcluster")
		if err != nil {
			return configError("vcluster", "not set and no vcluster in PATH (%s); must be the vcluster binary's path", os.Getenv("PATH"))
		}
		c.Vcluster = p
	} else if st, err := os.Stat(c.Vcluster); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return configError("vcluster", "%q is not an executable file; must be the vcluster binary's path", c.Vcluster)
	}
	if st, err := os.Stat(c.SecretFile); err != nil || st.IsDir() {
		return configError("secretFile", "%q: not a readable file; must be the lab's secret file", c.SecretFile)
	}
	if c.LabConfig != "" {
		if st, err := os.Stat(c.LabConfig); err != nil || st.IsDir() {
			return configError("labConfig", "%q: not a readable file; must be the lab config (YAML) or empty", c.LabConfig)
		}
	}
	return nil
}

// checkHostPort checks host:port; zeroOK allows port 0.
func checkHostPort(s string, zeroOK bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("no host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p > 65535 || p < 0 || (p == 0 && !zeroOK) {
		return fmt.Errorf("port %q out of range", port)
	}
	return nil
}

// hostFromArgs reads VCLUSTER_HOST from CNI_ARGS (K=V;K=V): -1 when it
// is absent. Other keys are ignored (runtimes pass their own, e.g.
// K8S_POD_NAME).
func hostFromArgs(args string) (int, error) {
	for _, kv := range strings.Split(args, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != HostArg {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("CNI_ARGS %s=%q: must be a host id, an integer in [0, fabric.hosts-1]", HostArg, v), "")
		}
		return n, nil
	}
	return -1, nil
}
