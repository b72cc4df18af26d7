package app

import (
	"context"
	"fmt"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
)

// Where the node's engines run (--instance-manager-runner).
const (
	InstanceManagerInProcess = "in-process"
	InstanceManagerProcess   = "process"
	// InstanceManagerExternal: in an instance manager this daemon does not
	// start, another container of its pod (package/), which the kubelet
	// starts and restarts; the daemon waits for it.
	InstanceManagerExternal = "external"
)

// InstanceManagerCmd is `longhorn-manager instance-manager`: the process
// that runs a node's engines and their NBD exports apart from the
// manager, which starts it (docs/data-plane.md).
func InstanceManagerCmd() cli.Command {
	return cli.Command{
		Name:  "instance-manager",
		Usage: "run the node's engines and their NBD exports, for the node's manager (which starts it)",
		Flags: []cli.Flag{
			cli.StringFlag{Name: "dir", Usage: "the instance manager's folder: its socket, pid file and lock (required; the daemon's is <data-dir>/instance-manager)"},
			cli.StringFlag{Name: "frontend-address", Value: "127.0.0.1", Usage: "the host the volumes' NBD frontends listen on"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("instance-manager takes no arguments, got %q", c.Args())
			}
			if err := requireFlags(c, "dir"); err != nil {
				return err
			}
			// SIGTERM stops it, and its engines; a SIGINT meant for the
			// terminal's foreground (the manager's Ctrl-C) does not reach
			// it, as it runs in a session of its own.
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return instancemanager.Serve(ctx, c.String("dir"), c.String("frontend-address"), logrus.WithField("component", "instance-manager"))
		},
	}
}

// instanceManagerSyncTimeout bounds the wait for the instance manager's
// list of engines at start; the controllers do not start without it.
const instanceManagerSyncTimeout = time.Minute

// startInstanceManager starts this node's instance manager unless it runs
// (a daemon started again finds the one of the daemon before), and
// returns its client once it has listed the engines it runs: the
// controllers adopt them and start none of theirs a second time. The
// client starts it again whenever it is gone.
func startInstanceManager(log *logrus.Entry, o DaemonOptions, metrics *kit.Metrics) (*instancemanager.Client, error) {
	dir := filepath.Join(o.DataDir, "instance-manager")
	imLog := log.WithField("component", "instance-manager")
	ensure := func() error {
		started, err := instancemanager.EnsureRunning(dir, o.InstanceManagerBinary, o.FrontendAddress, imLog)
		if started {
			metrics.InstanceManagerStart()
		}
		return err
	}
	revive := ensure
	if o.InstanceManagerRunner == InstanceManagerExternal {
		// Started by another, whose socket must be where that one serves:
		// in the folder both see.
		if sock := instancemanager.SocketPath(dir); filepath.Dir(sock) != dir {
			return nil, fmt.Errorf("--data-dir %s: the instance manager's socket, %s, is longer than a socket's path may be; use a shorter data folder", o.DataDir, filepath.Join(dir, filepath.Base(sock)))
		}
		ensure = func() error { return instancemanager.WaitRunning(dir, instanceManagerSyncTimeout) }
		revive = nil
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	client, err := instancemanager.Dial(instancemanager.SocketPath(dir), imLog, metrics.EngineCall, revive)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), instanceManagerSyncTimeout)
	defer cancel()
	if err := client.WaitSynced(ctx); err != nil {
		client.Close()
		return nil, err
	}
	return client, nil
}
