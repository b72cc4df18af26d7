// Package runner starts and watches the backing image servers (data
// sources and managers) for the controllers: as processes of this manager
// (ProcessRunner, for make run and tests) or as pods on this node
// (PodRunner, in a cluster). Both answer to ServerRunner.
package runner
