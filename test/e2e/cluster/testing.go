package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// ipForwardSysctl is the machine's IPv4 forwarding switch, which the
// cluster leaves as it is (it forwards for its bridge alone).
const ipForwardSysctl = "/proc/sys/net/ipv4/ip_forward"

// EnvBinDir overrides where the cluster's binaries are (Options.BinDir).
const EnvBinDir = "LONGHORN_NODE_BIN_DIR"

// shared is the package's cluster, set by Main; unavailable says why
// there is none.
var (
	shared      *Cluster
	unavailable string
)

// Main is the TestMain of a package whose tests run on the real node: it
// starts the cluster in a temporary folder, runs the tests and stops it.
// Without root or the cluster's binaries and tools the tests run anyway
// and Get skips them, saying why. Its result is the exit code for
// os.Exit.
func Main(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		unavailable = "not in the fast tier (-short)"
		return m.Run()
	}
	if os.Geteuid() != 0 {
		unavailable = "the node's kubelet and containerd need root"
		return m.Run()
	}
	binDir := os.Getenv(EnvBinDir)
	if binDir == "" {
		if root, err := repoBin(); err == nil {
			binDir = root
		}
	}
	if err := checkPrerequisites(binDir); err != nil {
		unavailable = err.Error()
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "longhorn-node-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		return 1
	}
	logFile, err := os.Create(filepath.Join(dir, "controlplane.out"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		return 1
	}
	before, err := machineNetwork()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		return 1
	}
	started := time.Now()
	shared, err = Start(context.Background(), Options{DataDir: dir, BinDir: binDir, Log: logFile})
	if err != nil {
		logFile.Close()
		// The folder stays for its logs.
		fmt.Fprintf(os.Stderr, "cluster: %v (its files are in %s)\n", err, dir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "cluster: node %s Ready in %s\n", NodeName, time.Since(started).Round(10*time.Millisecond))
	code := m.Run()
	stopped := time.Now()
	if err := shared.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: stop: %v (its files are in %s)\n", err, dir)
		logFile.Close()
		return 1
	}
	if err := checkRestored(dir, before); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: after stop: %v (its files are in %s)\n", err, dir)
		logFile.Close()
		return 1
	}
	fmt.Fprintf(os.Stderr, "cluster: stopped and cleaned up in %s\n", time.Since(stopped).Round(10*time.Millisecond))
	logFile.Close()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "cluster: its logs are in %s\n", filepath.Join(dir, "logs"))
	}
	return code
}

// Get returns the package's cluster, or skips the test when there is
// none. The package's TestMain must call Main.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if shared == nil {
		if unavailable == "" {
			t.Fatal("cluster.Get: the package's TestMain does not call cluster.Main")
		}
		t.Skipf("needs the real single-node cluster: %s", unavailable)
	}
	return shared
}

func repoBin() (string, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// networkState is what of the machine's network the cluster changes while
// it runs and must leave as it found it.
type networkState struct {
	ipForward string
	tables    []string
}

func machineNetwork() (networkState, error) {
	var n networkState
	var err error
	if n.ipForward, err = readSysctl(ipForwardSysctl); err != nil {
		return n, err
	}
	out, err := nftOutput("", "list", "tables")
	if err != nil {
		return n, err
	}
	for _, line := range strings.Split(out, "\n") {
		if table := strings.TrimSpace(strings.TrimPrefix(line, "table ")); table != "" {
			n.tables = append(n.tables, table)
		}
	}
	return n, nil
}

// checkRestored fails when the stopped cluster of dataDir left a process
// or its bridge, or the machine's IPv4 forwarding or nftables tables (any
// program's: kube-proxy's, the kubelet's iptables chains) are not as they
// were before the start.
func checkRestored(dataDir string, before networkState) error {
	var errs []error
	if pids := findProcesses(dataDir, []string{"coredns", "kube-proxy", "kubelet", "containerd", "controlplane"}, nil); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("processes of the cluster still run: %v", pids))
	}
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err == nil {
		errs = append(errs, fmt.Errorf("the bridge %s is left", BridgeName))
	}
	after, err := machineNetwork()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if after.ipForward != before.ipForward {
		errs = append(errs, fmt.Errorf("%s is %s, was %s before the start", ipForwardSysctl, after.ipForward, before.ipForward))
	}
	// None may be new, and none of the cluster's may be left even if it
	// was there before: the start's clean-up removes the tables of a
	// cluster that did not stop, and so a table may be gone that was.
	if left := slices.DeleteFunc(slices.Clone(after.tables), func(t string) bool { return slices.Contains(before.tables, t) && !slices.Contains(kernelTables, t) }); len(left) > 0 {
		errs = append(errs, fmt.Errorf("nftables tables %q are left (the machine's are %q, were %q before the start)", left, after.tables, before.tables))
	}
	return errors.Join(errs...)
}
