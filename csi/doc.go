// Package csi is the CSI driver, driver.longhorn.io: the way workloads use
// volumes. Kubernetes' sidecars (external-provisioner, -attacher) call its
// Controller service, which creates, deletes, attaches and detaches
// Longhorn Volumes through the manager's /v1 API, as Longhorn's own driver
// does, reading the StorageClass parameters Longhorn documents
// (params.go). The kubelet calls its Node service on each node, which
// turns an attached volume's NBD export into a block device, makes and
// mounts its filesystem, and publishes it into pods (node.go).
//
// One process serves the Identity service and either or both of the
// others on one unix socket: `longhorn-manager csi`.
package csi
