#!/usr/bin/env bash
# Builds bin/coredns, the cluster DNS of the real single-node cluster
# (docs/cluster.md), from the Go module proxy at the version below: CoreDNS
# as it is released, with its own go.mod, so none of its dependencies
# touches this project's or the control plane's modules. It is rebuilt only
# when the version (or Go's) changes: a hash of them is kept beside the
# binary. BIN_DIR, when set, is where it goes instead of bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN_DIR:-$PWD/bin}
version=v1.15.0
hash=$(echo "github.com/coredns/coredns@$version $(go version)" | sha256sum | cut -d' ' -f1)
if [ -x "$bin/coredns" ] && [ "$(cat "$bin/coredns.hash" 2>/dev/null)" = "$hash" ]; then
	exit 0
fi
echo "building $bin/coredns (github.com/coredns/coredns@$version); the first build takes several minutes" >&2
mkdir -p "$bin"
start=$SECONDS
gobin=$(mktemp -d)
trap 'rm -rf "$gobin"' EXIT
# go install of a version builds it as its own main module, outside any
# workspace or module of this repository.
(cd "$gobin" && GOBIN=$gobin GOWORK=off GOFLAGS= go install "github.com/coredns/coredns@$version")
mv "$gobin/coredns" "$bin/coredns"
echo "$hash" > "$bin/coredns.hash"
echo "built $bin/coredns in $((SECONDS - start))s" >&2
