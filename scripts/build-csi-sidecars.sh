#!/usr/bin/env bash
# Builds bin/csi-provisioner, bin/csi-attacher, bin/csi-resizer,
# bin/csi-snapshotter and bin/snapshot-controller, the real Kubernetes CSI
# sidecars (external-provisioner, -attacher, -resizer, -snapshotter) that the
# CSI driver's end-to-end tests run against the test control plane. They
# come from the Go module proxy; no sidecar source lives here. `go install pkg@version`
# refuses these modules (their go.mod has replace directives), so each module
# is downloaded, copied out of the read-only module cache, and its cmd/ built
# as the main module with -mod=mod. Like bin/controlplane, a binary is
# rebuilt only when its pinned version or the Go version changes: a hash of
# them is kept beside it.
#
# They are static (CGO_ENABLED=0: none needs cgo), so the same binaries
# run on this machine for the tests and from scratch in the sidecars'
# images (scripts/build-images.sh --sidecars). CSI_SIDECARS_BIN (default
# bin) is where they go.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out_dir=${CSI_SIDECARS_BIN:-bin}
case $out_dir in /*) ;; *) out_dir=$root/$out_dir ;; esac
export CGO_ENABLED=0

work=""
trap 'if [ -n "$work" ]; then chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"; fi' EXIT

build() {
	local out=$1 module=$2 version=$3 cmd=$4 dropreplace=${5:-}
	local hash
	hash=$( (echo "$module@$version $cmd${dropreplace:+ -dropreplace $dropreplace} CGO_ENABLED=0"; go version) | sha256sum | cut -d' ' -f1)
	if [ -x "$out_dir/$out" ] && [ "$(cat "$out_dir/$out.hash" 2>/dev/null)" = "$hash" ]; then
		return
	fi
	echo "building $out_dir/$out ($module $version); the first build takes several minutes" >&2
	mkdir -p "$out_dir"
	local start=$SECONDS dir
	dir=$(go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" {print $4}')
	if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
		echo "go mod download $module@$version gave no module directory" >&2
		exit 1
	fi
	[ -n "$work" ] || work=$(mktemp -d)
	cp -R "$dir" "$work/$out"
	chmod -R u+w "$work/$out"
	# A replace that points into the module's own repository (./client)
	# names a directory the module zip does not hold: drop it so the
	# version of that module served by the proxy is used instead.
	if [ -n "$dropreplace" ]; then
		(cd "$work/$out" && GOWORK=off go mod edit -dropreplace "$dropreplace")
	fi
	# The module's own go.mod and go.sum pin its dependencies; -mod=mod
	# lets go add any go.sum line its module graph needs (there is no
	# vendor/ in the module zip). No go.work may pull it into another build.
	(cd "$work/$out" && GOWORK=off GOFLAGS=-mod=mod go build -trimpath -ldflags "-X main.version=$version" -o "$out_dir/$out.tmp" "./$cmd")
	mv "$out_dir/$out.tmp" "$out_dir/$out"
	echo "$hash" > "$out_dir/$out.hash"
	echo "built $out_dir/$out in $((SECONDS - start))s" >&2
}

build csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 v6.4.0 cmd/csi-provisioner
build csi-attacher github.com/kubernetes-csi/external-attacher/v4 v4.13.0 cmd/csi-attacher
# Served under its major version's path only (the path without /v2 is
# refused by the proxy).
build csi-resizer github.com/kubernetes-csi/external-resizer/v2 v2.3.0 cmd/csi-resizer
# external-snapshotter gives two binaries: the csi-snapshotter sidecar, run
# beside the driver, and the cluster-wide snapshot controller. Both come from
# one module version; the snapshot CRDs they serve are in the client module
# (github.com/kubernetes-csi/external-snapshotter/client/v8, config/crd).
build csi-snapshotter github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0 cmd/csi-snapshotter github.com/kubernetes-csi/external-snapshotter/client/v8
build snapshot-controller github.com/kubernetes-csi/external-snapshotter/v8 v8.7.0 cmd/snapshot-controller github.com/kubernetes-csi/external-snapshotter/client/v8

# The snapshot CRDs the snapshot controller and the sidecar serve
# (VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshot), from the
# client module of the same release, copied out of the module cache into
# bin/snapshot-crds/ for the tests and `make run` to install; a cluster
# usually has them (docs/deploying.md).
crds() {
	local module=github.com/kubernetes-csi/external-snapshotter/client/v8 version=v8.7.0
	local out=bin/snapshot-crds
	if [ "$(cat "$out/version" 2>/dev/null)" = "$module@$version" ]; then
		return
	fi
	local dir
	dir=$(go mod download -json "$module@$version" | awk -F'"' '$2 == "Dir" {print $4}')
	if [ -z "$dir" ] || ! ls "$dir"/config/crd/snapshot.storage.k8s.io_*.yaml >/dev/null 2>&1; then
		echo "go mod download $module@$version gave no config/crd/snapshot.storage.k8s.io_*.yaml" >&2
		exit 1
	fi
	rm -rf "$out"
	mkdir -p "$out"
	cp "$dir"/config/crd/snapshot.storage.k8s.io_*.yaml "$out/"
	chmod u+w "$out"/*.yaml
	echo "$module@$version" > "$out/version"
}
crds
