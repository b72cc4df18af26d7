#!/usr/bin/env bash
# The whole suite: the generated-code check, vet, then unit and integration
# tests. Integration tests start the real local control plane
# (bin/controlplane) themselves, one per test package, the backup tests
# a real S3 server (bin/versitygw) on 127.0.0.1, and the CSI driver's
# end-to-end tests the real CSI sidecars (bin/csi-provisioner,
# bin/csi-attacher, bin/csi-snapshotter) and snapshot controller
# (bin/snapshot-controller, with the CRDs in bin/snapshot-crds). As root,
# last, test/e2e/node on a real single-node cluster (bin/kubelet and
# Debian's containerd; docs/cluster.md) and test/e2e/install, package/
# installed on it from the images of scripts/build-images.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
bash scripts/install-test-deps.sh
bash scripts/build-controlplane.sh
bash scripts/build-s3server.sh
bash scripts/build-csi-sidecars.sh
# The real node's kubelet (and, as root, containerd, runc and the CNI
# plugins), for test/e2e/node; it needs root, and skips saying so without.
root=false
if [ "$(id -u)" -eq 0 ]; then
	root=true
	bash scripts/build-node.sh
	bash scripts/build-images.sh --sidecars --ui-if-built >/dev/null
fi
bash scripts/verify-generated.sh
# The end-to-end tests (test/e2e) carry the build tag e2e, so that the
# fast tier (go test -short ./...) does not link them; the suite has it.
# The real node's (e2enode) run apart, after them: its node takes the
# machine's network and cgroups, which no other package's test touches.
go vet -tags e2e ./...
go vet -tags e2enode ./test/e2e/node/... ./test/e2e/cluster/... ./test/e2e/install/...
# -p 2: at most two packages (and so two control planes) at once on two cores.
# The output is kept so that a failure is summed up at the end, where a CI
# log's tail shows it, not only among the logs of the tests still running.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
go test -tags e2e -p 2 -count=1 -timeout 30m "$@" ./... 2>&1 | tee "$out" || rc=$?
if [ "$rc" -eq 0 ]; then
	if ! $root; then
		echo "test/e2e/node and test/e2e/install: skipped, they need root (a kubelet, containerd and a bridge; see docs/cluster.md)"
	fi
	# One package at a time: each starts the machine's one cluster.
	go test -tags e2enode -p 1 -count=1 -timeout 25m "$@" ./test/e2e/node/... ./test/e2e/install/... 2>&1 | tee -a "$out" || rc=$?
fi
if [ "$rc" -ne 0 ]; then
	echo "== what failed (go test exit $rc):"
	grep -E -A12 -- '^\s*--- FAIL|^panic:|^fatal error:|^\[setup failed\]|^# ' "$out" | grep -v -E '^(time=|I[0-9]{4} |W[0-9]{4} |E[0-9]{4} )' | head -200 || true
	grep -E '^FAIL[[:space:]]' "$out" || true
	exit "$rc"
fi
echo "test suite finished in $((SECONDS - start))s"
