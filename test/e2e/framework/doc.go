// Package framework is the shared harness of the end-to-end tests under
// test/e2e: each package there is one domain (api, backingimage, backup,
// csi, csisidecars, manager, recurringjob, snapshot, ui, volume), runs on a
// control plane of its own (Main) and starts real managers on it
// (StartDaemon, NewAPIEnv, NewRunnerEnv, TwoDiskNode, ...).
//
// Waits go through Eventually, whose timeouts LONGHORN_TEST_TIMEOUT_SCALE
// scales for a slow machine. `go test -short` skips every test here that
// needs a control plane.
package framework
