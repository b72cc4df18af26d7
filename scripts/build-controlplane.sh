#!/usr/bin/env bash
# Builds bin/controlplane and bin/kubectl from scripts/controlplane (its own
# Go module, pinned to k8s.io/kubernetes). The first build takes several
# minutes on two cores, so the binaries are rebuilt only when the module's
# sources change: a hash of them is kept beside each binary. BIN_DIR, when
# set, is where they go instead of bin/ (an absolute path).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN_DIR:-$PWD/bin}

src=scripts/controlplane
k8s_version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$src/go.mod")
minor=$(echo "$k8s_version" | cut -d. -f2)
# Its tests are not part of the binaries: a change to them rebuilds nothing.
hash=$( (cd "$src" && cat go.mod go.sum $(ls *.go | grep -v '_test\.go$'); echo "$(go version)") | sha256sum | cut -d' ' -f1)

# The version must be stamped in, or kubectl version and discovery clients
# see v0.0.0. -trimpath must not be used: the apiserver's test server finds
# its fixtures through its source path.
ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"

build() {
	local out=$1 pkg=$2
	if [ -x "$bin/$out" ] && [ "$(cat "$bin/$out.hash" 2>/dev/null)" = "$hash" ]; then
		return
	fi
	echo "building $bin/$out ($pkg, $k8s_version); the first build takes several minutes" >&2
	mkdir -p "$bin"
	local start=$SECONDS
	(cd "$src" && go build -ldflags "$ldflags" -o "$bin/$out" "$pkg")
	echo "$hash" > "$bin/$out.hash"
	echo "built $bin/$out in $((SECONDS - start))s" >&2
}

build controlplane .
build kubectl k8s.io/kubernetes/cmd/kubectl
# The kubelet and kube-proxy of the real single-node cluster
# (scripts/build-node.sh, docs/cluster.md) come from the same module, so
# they are the control plane's own version; only that script asks for them.
if [ "${BUILD_KUBELET:-}" = 1 ]; then
	build kubelet k8s.io/kubernetes/cmd/kubelet
fi
if [ "${BUILD_KUBE_PROXY:-}" = 1 ]; then
	build kube-proxy k8s.io/kubernetes/cmd/kube-proxy
fi
