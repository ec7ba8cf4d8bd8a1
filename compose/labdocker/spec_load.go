package labdocker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// load reads dir/ComposeFile with compose-go: the project name given,
// dir the working directory (relative paths resolve against it), and an
// empty environment (no OS variables, no .env), so that the same file
// loads the same way on every machine.
func load(ctx context.Context, dir, project string, swarm bool) (*types.Project, error) {
	if err := CheckName(project); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(abs, ComposeFile)
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	content, err = withoutVersion(content)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	p, err := loader.LoadWithContext(ctx, types.ConfigDetails{
		WorkingDir:  abs,
		ConfigFiles: []types.ConfigFile{{Filename: file, Content: content}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.SetProjectName(project, true)
		o.ResolvePaths = true
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	p.ComposeFiles = []string{file}
	if swarm {
		if err := CheckSwarm(p); err != nil {
			return nil, fmt.Errorf("%s: not deployable on a swarm: %w", file, err)
		}
	}
	return p, nil
}

// withoutVersion is a compose file without its top-level version: the
// file needs it (docker-compose 1.29 and docker stack deploy read a 3.x
// file by it), compose-go ignores it and warns on stderr that it is
// obsolete, which would mislead a lab's user.
func withoutVersion(content []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(content, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return content, nil // compose-go says what is wrong
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "version" {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return yaml.Marshal(&doc)
		}
	}
	return content, nil
}

// CheckSwarm applies the swarm profile to a loaded project: what docker
// stack deploy needs of a lab, or silently does otherwise than compose,
// as far as the file shows it (docs/lab-swarm.md):
//
//   - every service runs an image and has no build (stack deploy never
//     builds: the image must be on every node);
//   - every service has a deploy section with a restart_policy (lab
//     processes are not restarted: a restarted process has lost its
//     state), and the lab's fabric and host services are one replica
//     each (each is one process with an id);
//   - depends_on is plain order (stack deploy takes no condition);
//   - no network_mode (a swarm service joins networks) and no published
//     port with a host_ip (the routing mesh publishes on every node);
//   - networks are overlay (or no driver: stack deploy's default);
//   - a bind mount's source is a path on the node that runs the task:
//     allowed only on services constrained to node.role == manager (the
//     monitoring services, whose files are in the lab directory on the
//     manager that deploys).
//
// Every problem names the service (or network) and field.
func CheckSwarm(p *types.Project) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, name := range sortedKeys(p.Services) {
		s := p.Services[name]
		if s.Build != nil {
			bad("service %s: build: docker stack deploy does not build (load the image on every node)", name)
		}
		if s.Image == "" {
			bad("service %s: image: empty (docker stack deploy needs an image on every node)", name)
		}
		if s.NetworkMode != "" {
			bad("service %s: network_mode: %q (a swarm service joins networks; none allowed)", name, s.NetworkMode)
		}
		for _, port := range s.Ports {
			if port.HostIP != "" {
				bad("service %s: ports: %s:%s has a host_ip (the swarm routing mesh publishes on every node's addresses)", name, port.HostIP, port.Published)
			}
		}
		for _, dep := range sortedKeys(s.DependsOn) {
			if c := s.DependsOn[dep].Condition; c != "" && c != types.ServiceConditionStarted {
				bad("service %s: depends_on: %s: condition %s (docker stack takes a list, no condition)", name, dep, c)
			}
		}
		d := s.Deploy
		if d == nil {
			bad("service %s: deploy: missing (the lab states its swarm restart policy and placement)", name)
		} else {
			if d.RestartPolicy == nil {
				bad("service %s: deploy.restart_policy: missing (lab processes must not be restarted: condition none)", name)
			}
			if role := s.Labels[RoleLabel]; role == "fabric" || role == "host" {
				if d.Mode != "" && d.Mode != "replicated" {
					bad("service %s: deploy.mode: %q (a %s is one process: replicated, 1 replica)", name, d.Mode, role)
				}
				if d.Replicas != nil && *d.Replicas != 1 {
					bad("service %s: deploy.replicas: %d (a %s is one process: 1 replica)", name, *d.Replicas, role)
				}
			}
		}
		onManager := d != nil && slices.Contains(d.Placement.Constraints, ManagerConstraint)
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind && !onManager {
				bad("service %s: volumes: bind mount of %s (the source must exist on the node that runs it; only services placed with %q may bind-mount)", name, v.Source, ManagerConstraint)
			}
		}
	}
	for _, name := range sortedKeys(p.Networks) {
		n := p.Networks[name]
		if !bool(n.External) && n.Driver != "" && n.Driver != "overlay" {
			bad("network %s: driver: %q (a swarm network spanning nodes is overlay)", name, n.Driver)
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
