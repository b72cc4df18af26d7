// Command cluster runs the real single-node cluster of test/e2e/cluster
// until it gets SIGINT or SIGTERM, then stops it and cleans up: `make
// cluster` (scripts/cluster.sh). It needs root. See docs/cluster.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

func main() {
	dataDir := flag.String("data-dir", ".dev/cluster", "folder of the cluster's state: etcd (kept across starts), containerd's and the kubelet's files, logs")
	binDir := flag.String("bin-dir", os.Getenv(cluster.EnvBinDir), "folder of controlplane, kubectl, kubelet, kube-proxy and coredns (default the repository's bin/)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		fail(err)
	}
	logFile, err := os.OpenFile(filepath.Join(*dataDir, "controlplane.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fail(err)
	}
	defer logFile.Close()
	started := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{DataDir: *dataDir, BinDir: *binDir, Log: logFile})
	if err != nil {
		fail(err)
	}
	fmt.Printf("node %s Ready in %s; its logs are in %s\n", cluster.NodeName, time.Since(started).Round(10*time.Millisecond), filepath.Join(c.DataDir, "logs"))
	fmt.Printf("use it with:\n  export KUBECONFIG=%s\n  %s get nodes\n", c.Kubeconfig, filepath.Join(c.BinDir, "kubectl"))
	fmt.Printf("pods run the local image %s (imagePullPolicy: Never); Ctrl-C stops the cluster and cleans up\n", cluster.Image)
	<-ctx.Done()
	fmt.Println("stopping")
	if err := c.Stop(); err != nil {
		fail(err)
	}
	fmt.Println("stopped and cleaned up")
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
	os.Exit(1)
}
