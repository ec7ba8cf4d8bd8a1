package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labhost"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/units"
)

func init() { extraCommands = append(extraCommands, newHostCmd) }

func newHostCmd() *cobra.Command {
	var (
		id                                                   int
		fabricAddr, secretFile, api, speed, readyFile, netns string
		tunOptional                                          bool
		tunName                                              string
	)
	cmd := &cobra.Command{
		Use:   "host",
		Short: "Run one virtual host of a lab (netstack, NIC, MRC/RoCE, collectives) against a running `vcluster fabric`",
		Long: `host runs virtual host --id of the lab config (--config, --set, with links
scaled to --plane-speed per plane) as a real process in real-time pacing. Its
NIC ports reach the fabric process at --fabric over authenticated UDP
tunnels (the lab's --secret-file), and it serves an HTTP API at --api:
GET /v1/health, GET /v1/qps, POST /v1/collectives, GET /metrics.
With --tun-netns NAME it also creates a TUN device in that network namespace
with the host's plane-0 address: the namespace's kernel then answers for the
host (ping, TCP) while RDMA stays on the virtual NIC.

It runs until SIGINT or SIGTERM, then exits 0.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("id") {
				return usageError(fmt.Errorf("--id: required; the host this process runs, in [0, fabric.hosts-1]"))
			}
			if secretFile == "" {
				return usageError(fmt.Errorf("--secret-file: required; the lab's secret file (the same for the fabric and every host)"))
			}
			for _, a := range strings.Split(fabricAddr, ",") {
				if err := checkHostPort("fabric", strings.TrimSpace(a)); err != nil {
					return usageError(err)
				}
			}
			if tunName != "" && netns == "" {
				return usageError(fmt.Errorf("--tun-name: needs --tun-netns (it names that TUN device)"))
			}
			if tunName != "" && (len(tunName) > 15 || strings.ContainsAny(tunName, "/ \t\n:")) {
				return usageError(fmt.Errorf("--tun-name: %q is not an interface name (1..15 characters, no '/', ':' or space)", tunName))
			}
			if tunOptional && netns == "" {
				return usageError(fmt.Errorf("--tun-optional: needs --tun-netns (it makes that TUN device optional)"))
			}
			if err := checkHostPort("api", api); err != nil {
				return usageError(err)
			}
			if readyFile != "" {
				if st, err := os.Stat(filepath.Dir(readyFile)); err != nil || !st.IsDir() {
					return usageError(fmt.Errorf("--ready-file: %q: its directory does not exist", readyFile))
				}
			}
			bps, err := units.ParseSpeed(speed) // checked when parsed
			if err != nil {
				return usageError(fmt.Errorf("--plane-speed: %v", err))
			}
			path, sets, err := configSources(cmd)
			if err != nil {
				return err
			}
			lab, err := labspec.Resolve(path, sets, bps)
			if err != nil {
				return usageError(flagConfigError(cmd, err))
			}
			if n := lab.Config.Fabric.Hosts; id >= n {
				return usageError(fmt.Errorf("--id: %d is out of range; must be a host in [0, %d] (fabric.hosts is %d)", id, n-1, n))
			}
			secret, err := tunnel.LoadSecret(secretFile)
			if err != nil {
				return usageError(fmt.Errorf("--secret-file: %v", err))
			}
			stopsOnInterrupt()
			h, err := labhost.New(labhost.Options{ID: id, Lab: lab, Fabric: fabricAddr, Secret: secret, API: api, TunNetNS: netns, TunOptional: tunOptional, TunName: tunName})
			if err != nil {
				if strings.HasPrefix(err.Error(), "--") {
					return usageError(err)
				}
				return err
			}
			defer h.Close()
			if readyFile != "" {
				if err := writeReadyFile(readyFile, labapi.Ready{PID: os.Getpid(), API: h.APIAddr(), Tunnel: h.TunnelAddr()}); err != nil {
					return fmt.Errorf("--ready-file: %v", err)
				}
			}
			<-cmd.Context().Done()
			return h.Close()
		},
	}
	f := cmd.Flags()
	f.IntVar(&id, "id", 0, "the host this process runs (required), in [0, fabric.hosts-1]")
	limit(f, "id", intIn(0, maxFlagHosts-1, "required"))
	f.StringVar(&fabricAddr, "fabric", "127.0.0.1:7400", "the fabric's tunnel `address` (host:port; a name is resolved again while it does not answer), or one per plane, comma-separated in plane order")
	f.StringVar(&secretFile, "secret-file", "", "the lab's secret `file` (required; the fabric's)")
	f.StringVar(&api, "api", "127.0.0.1:0", "HTTP API listen `address` (port 0: any; --ready-file says which)")
	f.StringVar(&speed, "plane-speed", "1G", "host-link speed per plane the lab runs at (fabric links scaled alike)")
	limit(f, "plane-speed", planeSpeedFlag())
	f.StringVar(&readyFile, "ready-file", "", "once listening and serving, write {\"pid\",\"api\",\"tunnel\"} JSON to this `file` (atomically)")
	f.StringVar(&netns, "tun-netns", "", "open a TUN device with the host's plane-0 address in this network `namespace` (/run/netns/NAME or a path)")
	f.StringVar(&tunName, "tun-name", "", "with --tun-netns: the TUN device's `name` (default vc0)")
	f.BoolVar(&tunOptional, "tun-optional", false, "with --tun-netns: go on without the TUN device when the machine allows none (no /dev/net/tun or CAP_NET_ADMIN)")
	return cmd
}
