#!/usr/bin/env bash
# Builds bin/versitygw, the real S3 server the backup store's tests run on
# 127.0.0.1 (its posix backend keeps objects in a directory). It comes
# from the Go module proxy: scripts/s3server is its own Go module whose
# go.mod pins github.com/versity/versitygw as a tool, so no server source
# lives here. Like bin/controlplane, the binary is rebuilt only when the
# module's files or the Go version change: a hash of them is kept beside it.
set -euo pipefail
cd "$(dirname "$0")/.."

src=scripts/s3server
pkg=github.com/versity/versitygw/cmd/versitygw
version=$(awk -v p=github.com/versity/versitygw '$1 == p {print $2; exit}' "$src/go.mod")
hash=$( (cd "$src" && cat go.mod go.sum; echo "$(go version)") | sha256sum | cut -d' ' -f1)

if [ -x bin/versitygw ] && [ "$(cat bin/versitygw.hash 2>/dev/null)" = "$hash" ]; then
	exit 0
fi
echo "building bin/versitygw ($pkg $version); the first build takes a few minutes" >&2
mkdir -p bin
start=$SECONDS
(cd "$src" && go build -trimpath -o ../../bin/versitygw "$pkg")
echo "$hash" > bin/versitygw.hash
echo "built bin/versitygw in $((SECONDS - start))s" >&2
