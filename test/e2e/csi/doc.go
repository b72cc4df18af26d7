// Package csi holds the end-to-end tests of the CSI driver's gRPC services
// called directly: Controller and Node (nbdfuse, loop devices, real
// filesystems), expansion, clones, and csi-sanity.
package csi
