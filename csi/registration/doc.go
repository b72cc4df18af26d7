// Package registration registers the CSI driver's Node service with the
// kubelet, as Kubernetes' node-driver-registrar sidecar does, from the
// driver's own process: the sidecar's module is not served where this
// project builds its images.
//
// The kubelet's plugin watcher watches its plugins_registry directory for
// sockets. For each it dials the socket, asks the plugin registration API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1) GetInfo, validates the
// answer (a CSIPlugin, its name, the CSI socket's path on the host, CSI
// versions it supports), calls NodeGetInfo on that socket, records the
// driver in the node's CSINode, and tells the plugin the outcome with
// NotifyRegistrationStatus. A socket that disappears is deregistered; a
// socket made anew at the same path is registered anew.
//
// So the registration socket is offered only once the CSI socket answers
// a Probe, removed when the process stops, and, when the kubelet refuses
// the registration, withdrawn and offered again after a wait: where
// node-driver-registrar exits to be restarted by the kubelet, this process
// also runs the Node service and the staged volumes' nbdfuse, which a
// container restart would stop.
package registration
