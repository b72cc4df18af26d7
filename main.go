// Command longhorn-manager is the Longhorn manager: the daemon of
// controllers and the API, and the subcommands its workloads run.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"
	"k8s.io/klog/v2"

	"github.com/cadence-storage/longhorn-manager/app"
)

// Version is set at build time.
var Version = "dev"

// routeKlog sends the logs of client-go (klog) through logrus: its info
// lines at debug level, its warnings and errors at warn level, so the
// manager's output stays in one format.
func routeKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutputBySeverity("INFO", logrus.StandardLogger().WriterLevel(logrus.DebugLevel))
	klog.SetOutputBySeverity("WARNING", logrus.StandardLogger().WriterLevel(logrus.WarnLevel))
}

func main() {
	a := cli.NewApp()
	a.Name = "longhorn-manager"
	a.Usage = "recurring snapshots and backups for Kubernetes block storage"
	a.Version = Version
	a.Flags = []cli.Flag{
		cli.BoolFlag{Name: "debug, d", Usage: "log at debug level", EnvVar: "LONGHORN_DEBUG"},
		cli.BoolFlag{Name: "log-json, j", Usage: "log as JSON", EnvVar: "LONGHORN_LOG_JSON"},
	}
	a.Before = func(c *cli.Context) error {
		if c.GlobalBool("debug") {
			logrus.SetLevel(logrus.DebugLevel)
		}
		if c.GlobalBool("log-json") {
			logrus.SetFormatter(&logrus.JSONFormatter{})
		} else {
			logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
		}
		routeKlog()
		return nil
	}
	a.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return fmt.Errorf("%v (see %s --help)", err, a.Name)
	}
	a.Commands = []cli.Command{
		app.DaemonCmd(),
		app.UICmd(),
		app.RecurringJobCmd(),
		app.BackingImageDataSourceCmd(),
		app.BackingImageManagerCmd(),
		app.CSICmd(),
		app.InstanceManagerCmd(),
	}
	for i := range a.Commands {
		name := a.Commands[i].Name
		a.Commands[i].OnUsageError = func(c *cli.Context, err error, _ bool) error {
			return fmt.Errorf("%s: %v (see %s %s --help)", name, err, a.Name, name)
		}
	}
	if err := a.Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", a.Name, err)
		os.Exit(1)
	}
}
