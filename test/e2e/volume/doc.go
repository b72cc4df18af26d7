// Package volume holds the end-to-end tests of volumes and their data
// plane: attachment to a node, data read back over NBD, clones, expansion,
// failed replicas, the NBD frontend's address and the engine's listing pace.
package volume
