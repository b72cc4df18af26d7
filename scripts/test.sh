#!/usr/bin/env bash
# The whole suite: the generated-code check, vet, then unit and integration
# tests. Integration tests start the real local control plane
# (bin/controlplane) themselves, one per test package, and the backup tests
# a real S3 server (bin/versitygw) on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
bash scripts/install-test-deps.sh
bash scripts/build-controlplane.sh
bash scripts/build-s3server.sh
bash scripts/verify-generated.sh
go vet ./...
# -p 2: at most two packages (and so two control planes) at once on two cores.
go test -p 2 -count=1 -timeout 20m "$@" ./...
echo "test suite finished in $((SECONDS - start))s"
