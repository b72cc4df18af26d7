package framework

import (
	"fmt"
	"os"
	"testing"

	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// Main is every end-to-end package's TestMain. It starts the package's own
// control plane (testcluster.Main), runs the tests and stops it; when the
// test binary is started as a backing image server (EnvRunServer, see
// WithTestServers) it is that server instead.
func Main(m *testing.M) {
	// The tests' image servers listen on loopback, which downloads may not
	// reach by default: every data source of these tests (children of
	// this process, the fake kubelet's too) allows it.
	if _, set := os.LookupEnv(app.EnvDownloadAllowedRanges); !set {
		os.Setenv(app.EnvDownloadAllowedRanges, "127.0.0.0/8,::1/128")
	}
	if w := os.Getenv(EnvNBDBenchClient); w != "" {
		os.Exit(runNBDBenchClient(w, os.Args[1:]))
	}
	if os.Getenv(EnvRunServer) == "1" {
		a := cli.NewApp()
		a.Commands = []cli.Command{app.BackingImageDataSourceCmd(), app.BackingImageManagerCmd()}
		if err := a.Run(os.Args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := testcluster.Main(m)
	removeManagerBinary()
	os.Exit(code)
}
