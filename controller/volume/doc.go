// Package volume holds the volume controller: the recurring-job label
// rule, a volume's Replica and Engine objects, attach and detach (the
// engine runs on the node in spec.nodeID), restores from a backup, the wait
// for a backing image, deletion, and the mirror of the running engine into
// the Engine object's status.
package volume
