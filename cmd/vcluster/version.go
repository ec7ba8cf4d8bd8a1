package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version may be set at link time: -ldflags "-X main.version=v1.2.3".
// Otherwise the module version from the build info is used, or "dev".
var version = ""

const gvisorModule = "gvisor.dev/gvisor"

// buildVersions returns the vcluster version, the Go version and the
// version of the gvisor module linked into the binary ("not linked" when no
// package of it is linked).
func buildVersions() (vcluster, goVersion, gvisor string) {
	vcluster, goVersion, gvisor = version, runtime.Version(), "not linked"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if vcluster == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			vcluster = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, d := range bi.Deps {
			if d.Path != gvisorModule {
				continue
			}
			gvisor = d.Version
			if d.Replace != nil {
				gvisor = d.Replace.Path
				if d.Replace.Version != "" {
					gvisor += "@" + d.Replace.Version
				}
			}
		}
	}
	if vcluster == "" {
		vcluster = "dev"
	}
	return vcluster, goVersion, gvisor
}

func versionString() string {
	v, g, gv := buildVersions()
	return fmt.Sprintf("vcluster %s (%s, gvisor %s)", v, g, gv)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the vcluster, Go and gvisor versions",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}
