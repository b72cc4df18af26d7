#!/usr/bin/env bash
# Builds what the real single-node cluster (docs/cluster.md, `make cluster`,
# the end-to-end tests of test/e2e/node) needs besides the control plane:
# bin/kubelet and bin/kube-proxy, from the control plane's module
# (scripts/controlplane, pinned to k8s.io/kubernetes), bin/coredns (the
# cluster DNS, scripts/build-coredns.sh) and, as root, Debian's containerd,
# runc, CNI plugins and nftables (scripts/install-test-deps.sh). The
# kubelet's first build takes about ten minutes on two cores; each binary is
# rebuilt only when its sources change. BIN_DIR, when set, is where the
# binaries go instead of bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then
	bash scripts/install-test-deps.sh
fi
BUILD_KUBELET=1 BUILD_KUBE_PROXY=1 bash scripts/build-controlplane.sh
bash scripts/build-coredns.sh
