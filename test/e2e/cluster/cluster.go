// Package cluster starts a real single-node Kubernetes cluster on this
// machine for end-to-end tests and `make cluster`: the project's control
// plane in cluster mode (bin/controlplane --cluster: etcd, kube-apiserver
// with ServiceAccount admission, kube-scheduler and the controllers a
// node's workloads need), containerd with a configuration of its own, a
// CNI bridge, a kubelet (bin/kubelet) that registers the node, kube-proxy
// (bin/kube-proxy, nftables mode) and CoreDNS (bin/coredns) as the
// cluster's DNS, so that pods reach Services by cluster IP and name, the
// apiserver among them.
//
// It needs root: the kubelet mounts, containerd makes namespaces and
// cgroups, the bridge is a network device. Everything lives under one data
// folder (containerd's root and state, the kubelet's root, pod logs, the
// CNI configuration and IP leases), except what Linux or the programs keep
// elsewhere: the bridge (BridgeName), the pods' cgroups (under
// CgroupRoot), the folders of hostPaths (the kubelet's log links and
// device plugin socket, CNI's cache, containerd's shim sockets) and the
// nftables tables of kube-proxy and of the cluster's forwarding filter
// (forwarding.go). Stop removes all of it, and Start first cleans up
// after a run that did not stop (see cleanup.go). One cluster runs on the
// machine at a time: its bridge, subnet and ports are fixed.
//
// Everything listens on 127.0.0.1 (containerd's streaming server,
// kube-proxy's health and metrics) or on the bridge's own address (the
// kubelet, which the apiserver reaches there for logs and exec; CoreDNS),
// the apiserver on both: pods reach it at the bridge's address through the
// kubernetes Service.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

const (
	// NodeName is the name the kubelet registers the node with.
	NodeName = "longhorn-node"
	// BridgeName is the pods' bridge; the test makes it and removes it.
	BridgeName = "lhnode0"
	// PodSubnet is the pods' addresses, leased by CNI's host-local.
	PodSubnet = "10.244.0.0/24"
	// NodeIP is the bridge's own address: the node's InternalIP and where
	// its kubelet listens.
	NodeIP = "10.244.0.1"
	// CgroupRoot is the cgroup (in every v1 hierarchy) that holds the
	// pods' containers.
	CgroupRoot = "/longhorn-node"
)

// Controllers are the kube-controller-manager controllers of a cluster
// with a node: the test control plane's own (testcluster.Controllers) and
// those that turn workloads into pods and keep the node's objects.
var Controllers = append(append([]string{}, testcluster.Controllers...),
	"daemonset-controller", "deployment-controller", "replicaset-controller", "statefulset-controller",
	"ttl-after-finished-controller", "pod-garbage-collector-controller",
	// A pod's token volume holds the kube-root-ca.crt ConfigMap, which the
	// publisher writes in each namespace.
	"serviceaccount-controller", "root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
	// It fills the Secrets of type kubernetes.io/service-account-token a
	// user makes (no account gets one by itself any more).
	"serviceaccount-token-controller",
	"endpoints-controller", "endpointslice-controller", "endpointslice-mirroring-controller",
	"node-lifecycle-controller", "taint-eviction-controller",
	"persistentvolume-expander-controller", "persistentvolume-attach-detach-controller", "ephemeral-volume-controller",
)

// Options configure Start.
type Options struct {
	// DataDir holds everything of the cluster: the control plane's etcd
	// (kept across starts), containerd's, the kubelet's and the pods'
	// files (cleaned at each start and stop).
	DataDir string
	// BinDir holds controlplane, kubectl, kubelet, kube-proxy and
	// coredns; default the repository's bin/ (scripts/build-node.sh
	// builds them).
	BinDir string
	// Log receives the control plane's output; the node's components log
	// to files under DataDir/logs.
	Log io.Writer
}

// Cluster is a running single-node cluster.
type Cluster struct {
	*testcluster.Cluster
	// DataDir is Options.DataDir.
	DataDir string
	// BinDir is where its binaries are.
	BinDir string

	containerd *process
	kubelet    *process
	kubeProxy  *process
	coreDNS    *process
	lock       *os.File
	// created are the machine's folders (hostPaths) this run made.
	created []string
	stopped bool
}

// startTimeout bounds how long the node may take to become Ready.
const startTimeout = 3 * time.Minute

// Start cleans up what a previous run left, starts the control plane, the
// bridge, containerd and the kubelet, imports Image, waits until the node
// is Ready, then starts kube-proxy and CoreDNS and waits until they serve
// the kubernetes Service. On error it stops what it started.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the cluster's node needs root (mounts, namespaces, cgroups and a network bridge)")
	}
	root, err := testcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(root, "bin")
	}
	if err := checkPrerequisites(o.BinDir); err != nil {
		return nil, err
	}
	if o.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return nil, err
	}
	c = &Cluster{DataDir: o.DataDir, BinDir: o.BinDir}
	if c.lock, c.created, err = lockMachine(o.DataDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping what started: %v)", err, stopErr)
			}
		}
	}()
	for _, dir := range []string{"logs", "containerd", "cni", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(o.DataDir, dir), 0o700); err != nil {
			return c, err
		}
	}

	if err := createBridge(); err != nil {
		return c, err
	}
	if err := writeCNIConfig(o.DataDir); err != nil {
		return c, err
	}
	archive := filepath.Join(o.DataDir, "image.tar")
	if err := buildImage(root, o.DataDir, archive); err != nil {
		return c, err
	}
	if c.containerd, err = startContainerd(ctx, o.DataDir); err != nil {
		return c, err
	}
	if err := importImage(ctx, o.DataDir, archive); err != nil {
		return c, err
	}

	controlPlaneDir := filepath.Join(o.DataDir, "controlplane")
	cp, err := testcluster.Start(ctx, testcluster.Options{
		DataDir:     controlPlaneDir,
		Log:         o.Log,
		Bin:         filepath.Join(o.BinDir, "controlplane"),
		Controllers: Controllers,
		// The apiserver also serves on the bridge's address, the
		// kubernetes Service's endpoint.
		ExtraArgs: []string{"--cluster", "--advertise-address=" + NodeIP},
	})
	if err != nil {
		return c, err
	}
	c.Cluster = cp

	if c.kubelet, err = startKubelet(o.DataDir, o.BinDir, controlPlaneDir, cp.Kubeconfig); err != nil {
		return c, err
	}
	if err := c.waitNodeReady(ctx); err != nil {
		return c, err
	}
	if err := enableForwarding(); err != nil {
		return c, err
	}
	if c.kubeProxy, err = startKubeProxy(o.DataDir, o.BinDir, cp.Kubeconfig); err != nil {
		return c, err
	}
	if c.coreDNS, err = startCoreDNS(o.DataDir, o.BinDir, cp.Kubeconfig); err != nil {
		return c, err
	}
	if err := c.waitServices(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// checkPrerequisites names what is missing before anything starts.
func checkPrerequisites(binDir string) error {
	var missing []string
	for _, bin := range []string{"controlplane", "kubectl", "kubelet", "kube-proxy", "coredns"} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			missing = append(missing, filepath.Join(binDir, bin)+" (scripts/build-node.sh)")
		}
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "nft", "go"} {
		if _, err := lookPath(tool); err != nil {
			missing = append(missing, tool+" (scripts/install-test-deps.sh)")
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, plugin)+" (containernetworking-plugins)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the cluster needs %v", missing)
	}
	return nil
}

// waitNodeReady waits for the node's Ready condition, which the kubelet
// sets once containerd and the CNI network answer it.
func (c *Cluster) waitNodeReady(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, startTimeout, true, func(ctx context.Context) (bool, error) {
		if c.kubelet.exited() {
			return false, fmt.Errorf("the kubelet exited: see %s", c.kubelet.logPath)
		}
		node, err := client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", cond.Status, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready within %s (%s; logs in %s): %w", NodeName, startTimeout, last, filepath.Join(c.DataDir, "logs"), err)
	}
	return nil
}

// Stop stops CoreDNS, kube-proxy, the kubelet and the control plane,
// removes every pod through containerd (so CNI releases their addresses
// and network namespaces), stops containerd and removes what is left of
// the node: mounts under the data folder, cgroups, the bridge, the
// nftables tables. It is safe to call more than once. When something
// could not be cleaned up, the next Start tries again.
func (c *Cluster) Stop() error {
	// Once stopped, the bridge and the lock may be another run's.
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	for _, p := range []**process{&c.coreDNS, &c.kubeProxy} {
		if *p != nil {
			errs = append(errs, (*p).stop(15*time.Second))
			*p = nil
		}
	}
	if c.kubelet != nil {
		errs = append(errs, c.kubelet.stop(30*time.Second))
		c.kubelet = nil
	}
	// The pods go before the control plane: a pod that watches the
	// apiserver (the manager's, a controller's) keeps it from stopping in
	// time otherwise. cleanupNode removes them again, with whatever is
	// left.
	if c.containerd != nil && !c.containerd.exited() {
		if err := removePods(context.Background(), c.DataDir); err != nil {
			logrus.WithError(err).Warn("Could not remove the pods before stopping the control plane: cleaning up removes them after it")
		}
	}
	if c.Cluster != nil {
		errs = append(errs, c.Cluster.Stop())
		c.Cluster = nil
	}
	if err := cleanupNode(c.DataDir, c.containerd); err != nil {
		errs = append(errs, err)
		// The state file stays: the next Start cleans up again.
		if c.lock != nil {
			unlockFile(c.lock)
			c.lock = nil
		}
	}
	c.containerd = nil
	if c.lock != nil {
		errs = append(errs, unlockMachine(c.lock, c.created))
		c.lock = nil
	}
	return errors.Join(errs...)
}
