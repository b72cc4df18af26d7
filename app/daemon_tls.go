package app

import (
	"context"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/mtls"
)

// InternalTLSFolder, under --data-dir, holds the identity the daemon's
// child backing image managers (--backing-image-server-runner=process)
// and its child instance manager (--instance-manager-runner=process)
// read; InternalTLSDataSourceFolder its child data sources', of their
// narrow role.
const (
	InternalTLSFolder           = ".internal-tls"
	InternalTLSDataSourceFolder = ".internal-tls-data-source"
)

// internalTLS is the daemon's identity for its internal calls, and where
// its child servers read theirs ("" when none is a child process: pods
// mount the servers' Secret).
type internalTLS struct {
	id                       *mtls.Identity
	serverDir, dataSourceDir string
}

// startInternalTLS makes the cluster's internal CA on first start (or
// reads it), signs this manager's leaf and the servers', and keeps them
// renewed until ctx ends. Nothing to set up: `make run` gets a CA the
// same way a cluster does.
func startInternalTLS(ctx context.Context, log *logrus.Entry, kube kubernetes.Interface, o DaemonOptions, dataDir string) (internalTLS, error) {
	k := &mtls.Keeper{Kube: kube, Namespace: o.Namespace, Log: log.WithField("component", "internal-tls"), Clock: o.Clock}
	// The Secret for pods: the backing image servers' and the instance
	// managers' (which mount its component leaf to serve the node's
	// replicas); the folder for child processes.
	if o.BackingImageServerRunner == BackingImageServerRunnerPod || o.InstanceManagerRunner == InstanceManagerPod {
		k.ServerSecret = true
	}
	if o.BackingImageServerRunner != BackingImageServerRunnerPod || o.InstanceManagerRunner == InstanceManagerProcess {
		k.ServerDir = filepath.Join(dataDir, InternalTLSFolder)
		k.DataSourceDir = filepath.Join(dataDir, InternalTLSDataSourceFolder)
	}
	id, err := k.Start(ctx)
	if err != nil {
		return internalTLS{}, err
	}
	return internalTLS{id: id, serverDir: k.ServerDir, dataSourceDir: k.DataSourceDir}, nil
}
