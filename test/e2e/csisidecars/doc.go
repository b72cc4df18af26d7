// Package csisidecars holds the end-to-end tests of the CSI driver behind
// Kubernetes' real sidecars (external-provisioner, -attacher, -snapshotter
// and the snapshot controller): PVCs, VolumeAttachments, VolumeSnapshots,
// clones, backing images from StorageClasses and job labels from claims.
package csisidecars
