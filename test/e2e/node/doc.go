// Package node holds the end-to-end tests of the real single-node cluster
// (test/e2e/cluster: the control plane in cluster mode, containerd, a CNI
// bridge and a kubelet): pods, a DaemonSet, a CronJob, account tokens and
// the kubelet's callers. It needs root; its tests carry the build tag
// e2enode (see docs/cluster.md).
package node
