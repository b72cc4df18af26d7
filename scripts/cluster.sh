#!/usr/bin/env bash
# `make cluster`: the real single-node cluster (docs/cluster.md) until
# Ctrl-C, for a user who is root. Its binaries come from
# scripts/build-node.sh (in BIN_DIR when set, else bin/); its state is in
# .dev/cluster unless --data-dir says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "make cluster needs root: its kubelet mounts, and containerd makes namespaces, cgroups and a bridge" >&2
	exit 1
fi
bash scripts/build-node.sh
mkdir -p .dev
go build -o .dev/cluster-run ./test/e2e/cluster/cmd/cluster
exec .dev/cluster-run --bin-dir "${BIN_DIR:-$PWD/bin}" "$@"
