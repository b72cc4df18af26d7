#!/usr/bin/env bash
# Fails when the committed generated code or CRDs differ from what
# scripts/generate.sh makes from the API types: regenerates in a copy of the
# tree and compares.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Everything but build output and local state; the copy is small.
tar --exclude=./bin --exclude=./.dev --exclude=./.git -cf - . | tar -xf - -C "$work"
(cd "$work" && bash scripts/generate.sh)

status=0
for path in k8s/pkg/client k8s/crds k8s/pkg/apis/longhorn/v1beta2/zz_generated.deepcopy.go package/crds.yaml package/components/mutating-policies/admission.yaml engine/rpc/pb backingimage/rpc/pb; do
	if ! diff -r "$path" "$work/$path" >"$work/diff.txt" 2>&1; then
		echo "generated files are stale: $path differs from a fresh 'make generate':" >&2
		head -40 "$work/diff.txt" >&2
		status=1
	fi
done
if [ "$status" -ne 0 ]; then
	echo "run 'make generate' and commit the result" >&2
	exit 1
fi
echo "generated files are up to date"
