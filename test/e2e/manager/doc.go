// Package manager holds the end-to-end tests of the daemon as deployed:
// registration and RBAC, start-up faults, upgrades of old state, metrics
// across managers, and the package/ manifests on the control plane.
package manager
