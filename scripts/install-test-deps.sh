#!/usr/bin/env bash
# Installs the Debian tools the tests use: the NBD clients qemu-io and
# qemu-img (qemu-utils), nbdcopy and nbdinfo (libnbd-bin), and protoc
# (protobuf-compiler) for the generated-code check, Debian's chromium
# (headless) for the browser test of Longhorn's web UI, Debian's python3
# with requests and six for Longhorn's python client, and promtool
# (prometheus) for the tests of the alert rules in package/monitoring,
# and mkfs.xfs (xfsprogs) for the CSI Node service's xfs volumes, and
# mkfs.ext4, debugfs and e2fsck (e2fsprogs) for the full backup drill's
# test (a corrupted ext4 filesystem). As root, also containerd, runc, the
# CNI plugins and nftables (nft, which kube-proxy's nftables mode and the
# cluster's forwarding filter use) of the real single-node cluster
# (docs/cluster.md), which only root can start.
set -euo pipefail
missing=()
command -v qemu-io >/dev/null || missing+=(qemu-utils)
command -v nbdcopy >/dev/null || missing+=(libnbd-bin)
command -v protoc >/dev/null || missing+=(protobuf-compiler)
command -v chromium >/dev/null || missing+=(chromium)
/usr/bin/python3 -c 'import requests, six' 2>/dev/null || missing+=(python3 python3-requests python3-six)
command -v promtool >/dev/null || missing+=(prometheus)
command -v mkfs.xfs >/dev/null || [ -x /usr/sbin/mkfs.xfs ] || missing+=(xfsprogs)
command -v debugfs >/dev/null || [ -x /usr/sbin/debugfs ] || missing+=(e2fsprogs)
if [ "$(id -u)" -eq 0 ]; then
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || [ -x /usr/sbin/runc ] || missing+=(runc)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v nft >/dev/null || [ -x /usr/sbin/nft ] || missing+=(nftables)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "the tests need ${missing[*]}: run 'sudo apt-get install ${missing[*]}'" >&2
	exit 1
fi
echo "installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
