// Package instancemanager keeps each node's instance manager as
// deployed: an InstanceManager object and its pod, made by the node's
// manager (--instance-manager-runner=pod), adopted when the manager starts
// again, made again when it ends, and replaced by one of the manager's
// image once it hosts no engine. The process itself is package
// engine/instancemanager.
package instancemanager
