package app

import (
	"fmt"
	"os"
	"testing"

	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// envRunServer makes the test binary a backing image server, so the
// daemons the tests start can run their servers as child processes of
// this binary, as a real daemon runs them of its own.
const envRunServer = "LONGHORN_MANAGER_TEST_RUN_BACKING_IMAGE_SERVER"

func TestMain(m *testing.M) {
	// The tests' image servers listen on loopback, which downloads may not
	// reach by default: every data source of these tests (children of
	// this process, the fake kubelet's too) allows it.
	if _, set := os.LookupEnv(EnvDownloadAllowedRanges); !set {
		os.Setenv(EnvDownloadAllowedRanges, "127.0.0.0/8,::1/128")
	}
	if os.Getenv(envRunServer) == "1" {
		a := cli.NewApp()
		a.Commands = []cli.Command{BackingImageDataSourceCmd(), BackingImageManagerCmd()}
		if err := a.Run(os.Args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testcluster.Main(m))
}

// withTestServers runs the daemon's backing image servers from this test binary.
func withTestServers(o *DaemonOptions) {
	o.Hooks.BackingImageServerCommand = []string{os.Args[0]}
	o.Hooks.BackingImageServerEnv = []string{envRunServer + "=1"}
}
