package labcni

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/vcluster/vcluster/compose/labproc"
)

// About is what the plugin says when called without CNI_COMMAND.
const About = "vcluster-cni: attaches a network namespace to a running vcluster lab fabric as one of its hosts"

// Main runs the plugin as a runtime calls it (environment + stdin).
func Main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus,
	}, version.All, About)
}

// load parses the config; withFiles also checks the files it names.
func load(args *skel.CmdArgs, withFiles bool) (*NetConf, error) {
	c, err := ParseConfig(args.StdinData)
	if err != nil {
		return nil, err
	}
	if withFiles {
		if err := c.CheckFiles(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	c, err := load(args, true)
	if err != nil {
		return err
	}
	want, err := hostFromArgs(args.Args)
	if err != nil {
		return err
	}
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("CNI_NETNS %q: %v", args.Netns, err), "")
	}
	netns.Close()
	st := newStore(c)
	unlock, err := st.lock()
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	defer unlock()

	k := key(args.ContainerID, args.IfName)
	if r, ok, err := st.load(k); err != nil {
		return err
	} else if ok {
		// The runtime must not ADD twice without a DEL (spec, Lifecycle &
		// Ordering); a repeat for the same netns whose host still runs is
		// answered with the first result, a stale one is replaced.
		if r.Netns == args.Netns && labproc.IsOurs(r.PID, r.ReadyFile) && len(r.Result) > 0 {
			res, err := current.NewResult(r.Result)
			if err != nil {
				return err
			}
			return types.PrintResult(res, c.CNIVersion)
		}
		if r.Netns != args.Netns && labproc.IsOurs(r.PID, r.ReadyFile) {
			return fmt.Errorf("container %s ifname %s is already attached as host %d in %s (DEL it first)", args.ContainerID, args.IfName, r.Host, r.Netns)
		}
		stopPID(r.PID, r.ReadyFile)
		st.remove(k)
	}

	fs, err := fabricStatus(c.FabricAPI)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("fabricApi %s: the fabric does not answer: %v", c.FabricAPI, err), "")
	}
	fabric := c.Fabric
	if fabric == "" {
		fabric = fs.Listen
	}
	records, err := st.all()
	if err != nil {
		return err
	}
	taken := map[int]string{}
	for _, r := range records {
		if labproc.IsOurs(r.PID, r.ReadyFile) {
			taken[r.Host] = r.ContainerID
		}
	}
	id := want
	if id >= fs.Hosts {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_ARGS %s=%d: out of range; must be a host id in [0, %d] (the fabric has %d hosts)", HostArg, id, fs.Hosts-1, fs.Hosts), "")
	}
	if id >= 0 {
		if other, ok := taken[id]; ok {
			return fmt.Errorf("CNI_ARGS %s=%d: host %d is already attached (container %s)", HostArg, id, id, other)
		}
	} else {
		for i := 0; i < fs.Hosts; i++ {
			if _, ok := taken[i]; !ok {
				id = i
				break
			}
		}
		if id < 0 {
			return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("every host of the fabric (0..%d) is attached already", fs.Hosts-1), "")
		}
	}

	if err := ifnameFree(args.Netns, args.IfName); err != nil {
		return err
	}
	ready, logPath := st.readyPath(k), st.logPath(k)
	pid, api, err := startHost(c, hostArgs(c, id, fabric, args.Netns, args.IfName, ready), ready, logPath)
	if err != nil {
		return err
	}
	rec := Record{ContainerID: args.ContainerID, IfName: args.IfName, Netns: args.Netns,
		Host: id, PID: pid, API: api, Log: logPath, ReadyFile: ready}
	undo := func(err error) error {
		stopPID(pid, ready)
		st.remove(k)
		return err
	}
	// Recorded before anything else can fail, so a DEL finds the host.
	if err := st.save(rec); err != nil {
		return undo(err)
	}
	iface, ips, routes, err := inspect(args.Netns, args.IfName)
	if err != nil {
		return undo(err)
	}
	if len(ips) == 0 {
		return undo(fmt.Errorf("host %d: its TUN %q in %s has no global IPv6 address", id, args.IfName, args.Netns))
	}
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{iface}, IPs: ips, Routes: routes}
	rec.Address = ips[0].Address.String()
	if rec.Result, err = json.Marshal(res); err != nil {
		return undo(err)
	}
	if err := st.save(rec); err != nil {
		return undo(err)
	}
	return types.PrintResult(res, c.CNIVersion)
}

// cmdDel stops the attachment's host (its TUN goes with it) and forgets
// it; nothing recorded, or the netns gone, is success.
func cmdDel(args *skel.CmdArgs) error {
	c, err := load(args, false)
	if err != nil {
		return err
	}
	st := newStore(c)
	unlock, err := st.lock()
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	defer unlock()
	return detach(st, key(args.ContainerID, args.IfName))
}

func detach(st store, k string) error {
	r, ok, err := st.load(k)
	if err != nil || !ok {
		if err != nil { // an unreadable record is forgotten: DEL must succeed
			st.remove(k)
		}
		return nil
	}
	if err := stopPID(r.PID, r.ReadyFile); err != nil {
		return err
	}
	return st.remove(k)
}

// cmdCheck says what is broken: no record, the host not running or not
// up, the interface or its addresses missing.
func cmdCheck(args *skel.CmdArgs) error {
	c, err := load(args, false)
	if err != nil {
		return err
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.PluginConf); err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
	}
	st := newStore(c)
	r, ok, err := st.load(key(args.ContainerID, args.IfName))
	if err != nil {
		return err
	}
	if !ok {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("container %s ifname %s: no attachment recorded in %s", args.ContainerID, args.IfName, st.dir), "")
	}
	if !labproc.IsOurs(r.PID, r.ReadyFile) {
		return fmt.Errorf("container %s ifname %s: host %d (pid %d) is not running (log %s)", args.ContainerID, args.IfName, r.Host, r.PID, r.Log)
	}
	h, err := hostHealth(r.API)
	if err != nil {
		return fmt.Errorf("container %s ifname %s: host %d (pid %d) does not answer: %v", args.ContainerID, args.IfName, r.Host, r.PID, err)
	}
	if h.State != "up" {
		return fmt.Errorf("container %s ifname %s: host %d is %q, not up (it has lost the fabric)", args.ContainerID, args.IfName, r.Host, h.State)
	}
	var ips []*current.IPConfig
	var routes []*types.Route
	if c.PrevResult != nil {
		prev, err := current.NewResultFromResult(c.PrevResult)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
		ips, routes = prev.IPs, prev.Routes
	} else if r.Address != "" {
		a, n, err := net.ParseCIDR(r.Address)
		if err != nil {
			return fmt.Errorf("record: address %q: %v", r.Address, err)
		}
		n.IP = a
		ips = []*current.IPConfig{{Address: *n}}
	}
	return ns.WithNetNSPath(r.Netns, func(ns.NetNS) error {
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, ips); err != nil {
			return fmt.Errorf("container %s ifname %s in %s: %v", args.ContainerID, args.IfName, r.Netns, err)
		}
		if err := ip.ValidateExpectedRoute(routes); err != nil {
			return fmt.Errorf("container %s ifname %s in %s: %v", args.ContainerID, args.IfName, r.Netns, err)
		}
		return nil
	})
}

// cmdStatus is ready when the fabric's API answers.
func cmdStatus(args *skel.CmdArgs) error {
	c, err := load(args, false)
	if err != nil {
		return err
	}
	if _, err := fabricStatus(c.FabricAPI); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("fabricApi %s: the fabric does not answer: %v", c.FabricAPI, err), "")
	}
	return nil
}

// cmdGC detaches every recorded attachment not in
// cni.dev/valid-attachments; without that list it removes nothing.
func cmdGC(args *skel.CmdArgs) error {
	c, err := load(args, false)
	if err != nil {
		return err
	}
	if !c.hasValidAttachments {
		return nil
	}
	valid := map[string]bool{}
	for _, a := range c.ValidAttachments {
		valid[key(a.ContainerID, a.IfName)] = true
	}
	st := newStore(c)
	if _, err := os.Stat(st.dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := st.lock()
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	defer unlock()
	records, err := st.all()
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range records {
		if k := key(r.ContainerID, r.IfName); !valid[k] {
			errs = append(errs, detach(st, k))
		}
	}
	for _, l := range st.orphanLogs() {
		os.Remove(l)
	}
	return errors.Join(errs...)
}
