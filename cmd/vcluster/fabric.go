package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labfabric"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/units"
)

func init() { extraCommands = append(extraCommands, newFabricCmd) }

func newFabricCmd() *cobra.Command {
	var listen, api, secretFile, planes, planeSpeed, readyFile string
	cmd := &cobra.Command{
		Use:   "fabric",
		Short: "Run the switches of a config as a lab fabric process: hosts attach over UDP tunnels",
		Long: `vcluster fabric runs every switch of the config (any preset, forwarding mode,
trimming, PFC, ECN) on one real-time loop, with link speeds scaled to
--plane-speed per host link. Hosts (vcluster host) attach over
authenticated UDP tunnels at --listen, with the lab secret of --secret-file.
The HTTP API at --api serves /v1/status, /metrics, POST /v1/faults (a fault
plan, applied from the moment it arrives), /v1/capture?port=NAME (pcapng),
/v1/ports and /v1/graph?format=dot|svg. SIGINT or SIGTERM stops it (exit 0).`,
		Example: `  vcluster fabric --config lab.yaml --secret-file lab.secret --listen 127.0.0.1:7400 --api 127.0.0.1:7401
  curl -N 'http://127.0.0.1:7401/v1/capture?port=h1/p0' | tshark -r -`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range [][2]string{{"listen", listen}, {"api", api}} {
				if err := checkHostPort(f[0], f[1]); err != nil {
					return usageError(err)
				}
			}
			if secretFile == "" {
				return usageError(fmt.Errorf("--secret-file: required: the lab secret shared with the hosts (at least %d bytes, e.g. 64 hex characters: openssl rand -hex 32 > lab.secret)", tunnel.SecretMin))
			}
			secret, err := tunnel.LoadSecret(secretFile)
			if err != nil {
				return usageError(fmt.Errorf("--secret-file: %w", err))
			}
			bps, err := units.ParseSpeed(planeSpeed)
			if err != nil {
				return usageError(fmt.Errorf("--plane-speed: %w", err))
			}
			path, sets, err := configSources(cmd)
			if err != nil {
				return err
			}
			lab, err := labspec.Resolve(path, sets, bps)
			if err != nil {
				return usageError(err)
			}
			var pl []int
			if planes != "" {
				if pl, err = labfabric.ParsePlanes(planes); err != nil {
					return usageError(err)
				}
				if err := labfabric.CheckPlanes("--planes", pl, lab.Config.Fabric.Planes); err != nil {
					return usageError(err)
				}
			}
			if readyFile != "" {
				if st, err := os.Stat(filepath.Dir(readyFile)); err != nil || !st.IsDir() {
					return usageError(fmt.Errorf("--ready-file: %s: its directory does not exist", readyFile))
				}
			}
			f, err := labfabric.New(labfabric.Options{Lab: lab, Secret: secret, Listen: listen, API: api, Planes: pl, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			stopsOnInterrupt()
			f.Start()
			if readyFile != "" {
				if err := writeReadyFile(readyFile, labapi.Ready{PID: os.Getpid(), API: f.APIAddr(), Tunnel: f.TunnelAddr().String()}); err != nil {
					f.Stop()
					return fmt.Errorf("--ready-file: %w", err)
				}
			}
			<-cmd.Context().Done()
			f.Stop()
			fmt.Fprintln(cmd.ErrOrStderr(), "fabric: stopped")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:7400", "the tunnel's UDP `host:port` (port 0 picks one: see --ready-file)")
	fl.StringVar(&api, "api", "127.0.0.1:7401", "the HTTP API's `host:port` (port 0 picks one)")
	fl.StringVar(&secretFile, "secret-file", "", "the lab secret `file` the hosts share (required)")
	fl.StringVar(&planes, "planes", "", "run only these planes, comma-separated (default all); frames for others are dropped as unknown-host")
	fl.StringVar(&planeSpeed, "plane-speed", "1G", "host-link speed per plane the config is scaled to (fabric links by the same factor)")
	limit(fl, "plane-speed", planeSpeedFlag())
	fl.StringVar(&readyFile, "ready-file", "", "once serving, write {\"pid\",\"api\",\"tunnel\"} JSON to this `file` (atomically)")
	return cmd
}
