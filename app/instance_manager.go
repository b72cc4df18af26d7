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
	"k8s.io/client-go/kubernetes"

	imcontroller "github.com/cadence-storage/longhorn-manager/controller/instancemanager"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
	enginepb "github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Where the node's engines run (--instance-manager-runner).
const (
	InstanceManagerInProcess = "in-process"
	InstanceManagerProcess   = "process"
	// InstanceManagerExternal: in an instance manager this daemon does not
	// start, another container of its pod (package/), which the kubelet
	// starts and restarts; the daemon waits for it.
	InstanceManagerExternal = "external"
	// InstanceManagerPod: in a pod the daemon makes on its node
	// (controller/instancemanager), which outlives the daemon's own pod.
	InstanceManagerPod = "pod"
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
			cli.StringFlag{Name: "replica-address", Usage: "host:port where the node's replicas are served to engines on other nodes over the replica protocol (none when empty)"},
			cli.StringFlag{Name: "tls-dir", Usage: "the folder of the mutual-TLS leaf (ca.crt, tls.crt, tls.key) the replica protocol is served and reached with (plain TCP when empty: loopback tests only)"},
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
			cfg := instancemanager.Config{Dir: c.String("dir"), FrontendHost: c.String("frontend-address"),
				ReplicaAddress: c.String("replica-address"), TLSDir: c.String("tls-dir")}
			return instancemanager.Serve(ctx, cfg, logrus.WithField("component", "instance-manager"))
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
// client starts it again whenever it is gone. With the pod runner it
// returns the node's instance managers as one Set (the manager image's,
// and those of other images still hosting engines) with their keeper, for
// their controller. Either serves the node's replicas to other nodes'
// engines (instance.ReplicaServer): the pods on their own IP with the
// servers' Secret's leaf (controller/instancemanager/pod.go), the process
// with the leaf the manager keeps in tlsDir.
func startInstanceManager(log *logrus.Entry, o DaemonOptions, metrics *kit.Metrics, ds *datastore.DataStore,
	kube kubernetes.Interface, lh lhclientset.Interface, tlsDir string) (instance.Instances, func(volume string) enginepb.EngineClient, *instanceManagerPods, error) {
	dir := filepath.Join(o.DataDir, "instance-manager")
	imLog := log.WithField("component", "instance-manager")
	if o.InstanceManagerRunner == InstanceManagerPod {
		return startInstanceManagerPods(log, o, metrics, ds, kube, lh)
	}
	ensure := func() error {
		started, err := instancemanager.EnsureRunning(imConfig(o, dir, tlsDir), o.InstanceManagerBinary, imLog)
		if started {
			metrics.InstanceManagerStart()
		}
		return err
	}
	revive := ensure
	if o.InstanceManagerRunner == InstanceManagerExternal {
		// Started by another, whose socket must be where that one serves:
		// in the folder both see.
		if err := checkSharedSocket(o, dir); err != nil {
			return nil, nil, nil, err
		}
		ensure = func() error { return instancemanager.WaitRunning(dir, instanceManagerSyncTimeout) }
		revive = nil
	}
	if err := ensure(); err != nil {
		return nil, nil, nil, err
	}
	client, err := dialSynced(dir, imLog, metrics, revive)
	if err != nil {
		return nil, nil, nil, err
	}
	engine := client.Engine()
	return client, func(string) enginepb.EngineClient { return engine }, nil, nil
}

// imConfig is what the node's instance manager process runs with: it
// serves the node's replicas at --replica-address with the leaf the
// manager keeps in tlsDir for its child servers; without that folder
// (those servers run as pods) it serves none rather than serve on plain
// TCP.
func imConfig(o DaemonOptions, dir, tlsDir string) instancemanager.Config {
	cfg := instancemanager.Config{Dir: dir, FrontendHost: o.FrontendAddress}
	if tlsDir != "" {
		cfg.ReplicaAddress, cfg.TLSDir = o.ReplicaAddress, tlsDir
	}
	return cfg
}

// checkSharedSocket refuses a data folder under which the socket of an
// instance manager in another container (dir) would not be in dir.
func checkSharedSocket(o DaemonOptions, dir string) error {
	if sock := instancemanager.SocketPath(dir); filepath.Dir(sock) != dir {
		return fmt.Errorf("--data-dir %s: the instance manager's socket, %s, is longer than a socket's path may be; use a shorter data folder", o.DataDir, filepath.Join(dir, filepath.Base(sock)))
	}
	return nil
}

// dialSynced returns the client of the instance manager serving in dir
// once it has listed its engines.
func dialSynced(dir string, log *logrus.Entry, metrics *kit.Metrics, revive func() error) (*instancemanager.Client, error) {
	client, err := instancemanager.Dial(instancemanager.SocketPath(dir), log, metrics.EngineCall, revive)
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

// instanceManagerPods are the node's instance managers as pods: their
// keeper and the Set of their clients.
type instanceManagerPods struct {
	keeper *imcontroller.Keeper
	set    *imcontroller.Set
}

// startInstanceManagerPods makes or finds the node's instance manager of
// the manager's image and follows it, and follows those of other images
// found with a pod: their engines run on there until their volumes
// detach.
func startInstanceManagerPods(log *logrus.Entry, o DaemonOptions, metrics *kit.Metrics, ds *datastore.DataStore,
	kube kubernetes.Interface, lh lhclientset.Interface) (instance.Instances, func(volume string) enginepb.EngineClient, *instanceManagerPods, error) {
	if o.ManagerImage == "" {
		return nil, nil, nil, fmt.Errorf("--instance-manager-runner=pod: the instance manager's pod runs the manager's image; give --manager-image or --pod-name")
	}
	keeper := imcontroller.NewKeeper(log, kube, lh, imcontroller.Config{Namespace: o.Namespace, NodeID: o.NodeName, Image: o.ManagerImage,
		DataDir: o.DataDir, Placement: podPlacement(log, ds), OnPodCreated: metrics.InstanceManagerStart})
	name := imcontroller.Name(o.NodeName, o.ManagerImage)
	dir := imcontroller.Dir(o.DataDir, name)
	if err := checkSharedSocket(o, dir); err != nil {
		return nil, nil, nil, err
	}
	imLog := log.WithFields(logrus.Fields{"component": "instance-manager", "instanceManager": name})
	if err := waitInstanceManagerPod(imLog, keeper, dir); err != nil {
		return nil, nil, nil, err
	}
	current, err := podMember(dir, name, o.ManagerImage, imLog, metrics, keeper.Revive, true)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), instanceManagerSyncTimeout)
	found, err := keeper.Others(ctx)
	cancel()
	if err != nil {
		current.Client.Close()
		return nil, nil, nil, err
	}
	var others []imcontroller.Member
	for _, f := range found {
		oLog := log.WithFields(logrus.Fields{"component": "instance-manager", "instanceManager": f.InstanceManager.Name, "image": f.InstanceManager.Spec.Image})
		// Its engines are adopted; its pod is not made again if it goes
		// (the kubelet restarts its container).
		m, err := podMember(f.Dir, f.InstanceManager.Name, f.InstanceManager.Spec.Image, oLog, metrics, nil, false)
		if err != nil {
			for _, o := range append(others, current) {
				o.Client.Close()
			}
			return nil, nil, nil, fmt.Errorf("instance manager %s of image %s: %w", f.InstanceManager.Name, f.InstanceManager.Spec.Image, err)
		}
		oLog.WithField("engines", m.Client.Hosting()).Info("Following an instance manager of another image: its engines run on there until their volumes detach")
		others = append(others, m)
	}
	set := imcontroller.NewSet(keeper, current, others)
	return set, set.EngineFor, &instanceManagerPods{keeper: keeper, set: set}, nil
}

// podMember dials the instance manager of an InstanceManager's pod,
// serving in dir, and its devices. Its engines are listed within
// instanceManagerSyncTimeout; one of another image (not required) that
// does not is followed without them listed: a pod whose container
// restarts may be long to answer, and none of its volumes' engines is
// started elsewhere meanwhile (the set waits for it).
func podMember(dir, name, image string, log *logrus.Entry, metrics *kit.Metrics, revive func() error, required bool) (imcontroller.Member, error) {
	client, err := instancemanager.Dial(instancemanager.SocketPath(dir), log, metrics.EngineCall, revive)
	if err != nil {
		return imcontroller.Member{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), instanceManagerSyncTimeout)
	defer cancel()
	if err := client.WaitSynced(ctx); err != nil {
		if required {
			client.Close()
			return imcontroller.Member{}, err
		}
		log.WithError(err).Warn("The instance manager does not list its engines yet; it is followed until it does")
	}
	devices, err := instancemanager.DialDevices(dir)
	if err != nil {
		client.Close()
		return imcontroller.Member{}, err
	}
	return imcontroller.Member{Name: name, Image: image, Client: client, Devices: devices}, nil
}

// instanceManagerPodTimeout bounds the wait at start for the instance
// manager's pod to serve: its image may have to be pulled.
const instanceManagerPodTimeout = 5 * time.Minute

// waitInstanceManagerPod makes or finds the node's instance manager pod
// and waits until it answers, saying every so often what it waits for.
func waitInstanceManagerPod(log *logrus.Entry, keeper *imcontroller.Keeper, dir string) error {
	deadline := time.Now().Add(instanceManagerPodTimeout)
	lastSaid := time.Time{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		im, err := keeper.Ensure(ctx)
		cancel()
		if err == nil && instancemanager.WaitRunning(dir, 2*time.Second) == nil {
			log.WithField("instanceManager", im.Name).Info("The node's instance manager answers")
			return nil
		}
		if err == nil {
			err = fmt.Errorf("its pod %s runs; its socket in %s does not answer yet", im.Name, dir)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node's instance manager did not answer within %s: %w", instanceManagerPodTimeout, err)
		}
		if time.Since(lastSaid) >= 10*time.Second {
			log.WithError(err).Info("Waiting for the node's instance manager")
			lastSaid = time.Now()
		}
		time.Sleep(time.Second)
	}
}

// podPlacement reads the pod settings (tolerations, priority class,
// registry secret) at each pod's creation.
func podPlacement(log *logrus.Entry, ds *datastore.DataStore) func() types.PodPlacement {
	return func() types.PodPlacement {
		p, err := types.ParsePodPlacement(ds.GetSettingValue)
		if err != nil {
			log.WithError(err).Warn("A pod setting cannot be read or does not parse; the pod is made without it")
		}
		return p
	}
}
