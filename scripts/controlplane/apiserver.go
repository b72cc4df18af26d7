package main

import (
	"fmt"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// startAPIServer starts kube-apiserver in this process against the given
// etcd. The test server listens on a free 127.0.0.1 port and returns an
// admin (loopback) client config.
func startAPIServer(tb *processTB, etcdURL string) (kubeapiservertesting.TestServer, error) {
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := []string{
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
		"--authorization-mode=RBAC",
		// As on a real cluster (kubeadm sets it): the shipped DaemonSet
		// runs privileged, and its manifest is checked against this one.
		"--allow-privileged=true",
	}
	opts := kubeapiservertesting.NewDefaultTestServerOptions()
	server, err := kubeapiservertesting.StartTestServer(tb, opts, flags, storage)
	if err != nil {
		return server, fmt.Errorf("start kube-apiserver: %w", err)
	}
	return server, nil
}
