#!/usr/bin/env bash
# Builds the project's container images without a Docker daemon or a
# registry, as OCI archives under bin/images/ that containerd imports
# (`ctr -n k8s.io images import`):
#
#   longhorn-manager:dev   Debian bookworm with the tools the CSI Node
#                          service and the full backup drills run (the
#                          packages package/Dockerfile installs) and the
#                          static longhorn-manager binary: the same image
#                          as `docker build -f package/Dockerfile .`
#   longhorn-ui:dev        the static binary and Longhorn's web UI, built
#                          unmodified in ../shared/longhorn-ui (its dist
#                          folder at /web/dist), served by `longhorn-manager
#                          ui --dist /web/dist`
#   registry.k8s.io/sig-storage/<sidecar>:<version>, with --sidecars: the
#                          CSI sidecars built static from the Go module
#                          proxy at the versions package/ names, under the
#                          names package/ pulls, so its manifests run here
#                          unchanged (imagePullPolicy IfNotPresent)
#
# No node-driver-registrar or livenessprobe image is built (their modules
# are not served by the module proxy), and none is needed: `longhorn-manager
# csi` registers itself with the kubelet and serves its own /healthz
# (docs/csi.md, "Registration and liveness").
#
# Usage: scripts/build-images.sh [--sidecars] [--ui-if-built] [--import CONTAINERD_SOCKET]
#
# It needs root (buildah with its vfs storage under bin/images/storage,
# mmdebstrap), and installs Debian's buildah and mmdebstrap when they are
# missing. The Debian base is made once by mmdebstrap (minutes: it
# downloads its packages) and kept until its package list changes; an
# image is made again only when what goes in it changed (a hash beside
# each archive).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

sidecars=false
import=""
ui_required=true
while [ $# -gt 0 ]; do
	case "$1" in
	--sidecars) sidecars=true ;;
	# Without Longhorn's built UI beside the repository, make the other
	# images and say so, rather than fail (the tests' run where it is not).
	--ui-if-built) ui_required=false ;;
	--import)
		import=${2:?--import needs the socket of a containerd}
		shift
		;;
	*)
		echo "usage: $0 [--sidecars] [--ui-if-built] [--import CONTAINERD_SOCKET]" >&2
		exit 2
		;;
	esac
	shift
done

if [ "$(id -u)" -ne 0 ]; then
	echo "building images needs root (buildah and mmdebstrap); run it as root" >&2
	exit 1
fi
missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

out=bin/images
mkdir -p "$out"
# buildah's own storage, not the machine's: nothing of it outlives a
# `make clean`, and no other user of buildah here sees it.
buildah=(buildah --root "$root/$out/storage" --runroot "$root/$out/run" --storage-driver vfs)
work=$(mktemp -d)
containers=()
cleanup() {
	for c in "${containers[@]}"; do "${buildah[@]}" rm "$c" >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT

# The manager's Debian packages, as package/Dockerfile installs them.
packages=ca-certificates,libnbd-bin,fuse3,mount,util-linux,e2fsprogs,xfsprogs
suite=bookworm

# base makes $out/base.tar: Debian's minimal base and the packages, without
# documentation, manual pages or locales (as Debian's slim images), and
# without apt's lists.
base() {
	local want="$suite $packages slim"
	if [ -f "$out/base.tar" ] && [ "$(cat "$out/base.tar.hash" 2>/dev/null)" = "$want" ]; then
		return
	fi
	echo "making the Debian base ($suite: $packages); the first time downloads its packages, minutes" >&2
	local start=$SECONDS
	mmdebstrap --variant=minbase --include="$packages" \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--format=tar "$suite" "$out/base.tmp.tar" > "$work/mmdebstrap.log" 2>&1 || {
		tail -20 "$work/mmdebstrap.log" >&2
		exit 1
	}
	rm -rf "$out/base.tar"
	mv "$out/base.tmp.tar" "$out/base.tar"
	echo "$want" > "$out/base.tar.hash"
	echo "made the Debian base in $((SECONDS - start))s" >&2
}

# image NAME HASH CMD-JSON FROM-TAR -- SRC:DEST...: makes $out/<file>.oci.tar
# of image NAME, from scratch or from FROM-TAR unpacked (when not ""),
# whose command is CMD-JSON (its entrypoint when ENTRYPOINT=1 is set, as
# the sidecars' images have it: manifests give them arguments alone), with
# each SRC copied to DEST, unless its hash is HASH already; adds the
# archive to built.
built=()
image() {
	local name=$1 hash=$2 cmd=$3 from=$4
	shift 5
	local file ref=$name
	hash="$hash entrypoint=${ENTRYPOINT:-}"
	file=$(echo "$name" | tr '/:' '__')
	# The kubelet asks containerd for an image by its normalized name
	# (longhorn-manager:dev is docker.io/library/longhorn-manager:dev), and
	# `ctr images import` keeps the name an archive carries as it is
	# written: so a name without a registry is written normalized.
	case $name in */*) ;; *) ref=docker.io/library/$name ;; esac
	hash="$hash $ref"
	built+=("$out/$file.oci.tar")
	if [ -f "$out/$file.oci.tar" ] && [ "$(cat "$out/$file.oci.tar.hash" 2>/dev/null)" = "$hash" ]; then
		return
	fi
	echo "making image $name" >&2
	local c
	c=$("${buildah[@]}" from scratch)
	containers+=("$c")
	if [ -n "$from" ]; then
		"${buildah[@]}" add "$c" "$from" / >/dev/null
	fi
	local pair
	for pair in "$@"; do
		"${buildah[@]}" copy "$c" "${pair%%:*}" "${pair#*:}" >/dev/null
	done
	local entrypoint='[]'
	if [ "${ENTRYPOINT:-}" = 1 ]; then
		entrypoint=$cmd cmd='[]'
	fi
	"${buildah[@]}" config --entrypoint "$entrypoint" --cmd "$cmd" --label "io.longhorn.source=longhorn-manager scripts/build-images.sh" "$c"
	rm -f "$out/$file.oci.tar"
	"${buildah[@]}" commit --quiet "$c" "oci-archive:$root/$out/$file.oci.tar:$ref" >/dev/null
	echo "$hash" > "$out/$file.oci.tar.hash"
}

# The manager's binary, static, as the Dockerfile builds it.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/longhorn-manager" .
manager_hash=$(sha256sum "$work/longhorn-manager" | cut -d' ' -f1)

base
base_hash=$(cat "$out/base.tar.hash")
image longhorn-manager:dev "$manager_hash $base_hash" '["longhorn-manager","daemon"]' "$out/base.tar" -- \
	"$work/longhorn-manager:/usr/local/bin/longhorn-manager"

ui=../shared/longhorn-ui/dist
if [ -f "$ui/index.html" ]; then
	ui_hash=$( (echo "$manager_hash"; cd "$ui" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)
	image longhorn-ui:dev "$ui_hash" '["longhorn-manager","ui","--dist","/web/dist"]' "" -- \
		"$work/longhorn-manager:/usr/local/bin/longhorn-manager" "$ui:/web/dist"
elif $ui_required; then
	echo "no built UI in $ui (index.html): see ../shared/longhorn-ui/README.md" >&2
	exit 1
else
	echo "no built UI in $ui (index.html): longhorn-ui:dev is not made" >&2
	rm -f "$out/longhorn-ui_dev.oci.tar" "$out/longhorn-ui_dev.oci.tar.hash"
fi

if $sidecars; then
	# The tests' own sidecars, which are static (scripts/build-csi-sidecars.sh).
	bash scripts/build-csi-sidecars.sh
	for bin in csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller; do
		version=$(awk -v b="$bin" '$1 == "build" && $2 == b {print $4}' scripts/build-csi-sidecars.sh)
		ENTRYPOINT=1 image "registry.k8s.io/sig-storage/$bin:$version" "$(sha256sum "bin/$bin" | cut -d' ' -f1)" "[\"/$bin\"]" "" -- \
			"bin/$bin:/$bin"
	done
fi

for archive in "${built[@]}"; do
	echo "$archive"
	if [ -n "$import" ]; then
		ctr --address "$import" -n k8s.io images import "$archive" >/dev/null
	fi
done
