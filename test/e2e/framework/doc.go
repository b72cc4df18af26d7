// Package framework is the shared harness of the end-to-end tests under
// test/e2e: each package there is one domain (api, backingimage, backup,
// csi, csisidecars, manager, recurringjob, snapshot, ui, volume), runs on a
// control plane of its own (Main) and starts real managers on it
// (StartDaemon, NewAPIEnv, NewRunnerEnv, TwoDiskNode, ...).
//
// Waits go through Eventually, whose timeouts LONGHORN_TEST_TIMEOUT_SCALE
// scales for a slow machine. The tests carry the build tag e2e, which
// make test and make bench set: run one package with
// `go test -tags e2e ./test/e2e/<domain>`; without the tag there is
// nothing to run (and the fast tier, `go test -short ./...`, links none of
// them).
package framework
