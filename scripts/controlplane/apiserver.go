package main

import (
	"context"
	"fmt"
	"net"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// startAPIServer starts kube-apiserver in this process against the given
// etcd. The test server listens on a free 127.0.0.1 port and returns an
// admin (loopback) client config. Without a kubelet no pod runs, so the
// ServiceAccount admission plugin, which would refuse pods of accounts that
// no controller made, is on only for a cluster.
//
// A cluster's apiserver given an advertise address also serves there and
// keeps the kubernetes Service's endpoints at it (the lease reconciler);
// otherwise the Service has none, as its only address is loopback.
func startAPIServer(ctx context.Context, tb *processTB, dataDir, etcdURL string, cluster bool, advertise net.IP) (kubeapiservertesting.TestServer, error) {
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := []string{
		"--authorization-mode=RBAC",
		// As on a real cluster (kubeadm sets it): the shipped DaemonSet
		// runs privileged, and its manifest is checked against this one.
		"--allow-privileged=true",
	}
	if cluster {
		// The node registers with a name nothing resolves: the apiserver
		// reaches its kubelet (logs, exec) at its address.
		flags = append(flags, "--kubelet-preferred-address-types=InternalIP")
	} else {
		flags = append(flags, "--disable-admission-plugins=ServiceAccount")
	}
	if !cluster || advertise == nil {
		flags = append(flags, "--endpoint-reconciler-type=none")
	}
	if cluster {
		return startClusterAPIServer(ctx, dataDir, etcdURL, advertise, flags)
	}
	opts := kubeapiservertesting.NewDefaultTestServerOptions()
	server, err := kubeapiservertesting.StartTestServer(tb, opts, flags, storage)
	if err != nil {
		return server, fmt.Errorf("start kube-apiserver: %w", err)
	}
	return server, nil
}
