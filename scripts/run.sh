#!/usr/bin/env bash
# Runs the manager on the local control plane: starts bin/controlplane with
# its state under .dev/ (kept across runs), then the daemon in the
# foreground. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=.dev
mkdir -p "$dev"
kubeconfig="$dev/kubeconfig"
node=${NODE_NAME:-$(hostname)}
api=${API_ADDRESS:-127.0.0.1:9500}

cp_pid=""
cleanup() {
	if [ -n "$cp_pid" ] && kill -0 "$cp_pid" 2>/dev/null; then
		echo "stopping the control plane (pid $cp_pid)"
		kill -TERM "$cp_pid"
		wait "$cp_pid" || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "starting the local control plane (state in $dev/controlplane, logs in $dev/controlplane/controlplane.log)"
rm -f "$kubeconfig"
./bin/controlplane --data-dir "$dev/controlplane" --kubeconfig "$kubeconfig" \
	--crd-dir k8s/crds --namespaces longhorn-system > "$dev/controlplane.out" 2>&1 &
cp_pid=$!
for _ in $(seq 1 120); do
	grep -q '^ready ' "$dev/controlplane.out" && break
	if ! kill -0 "$cp_pid" 2>/dev/null; then
		echo "the control plane failed to start:" >&2
		tail -20 "$dev/controlplane.out" >&2
		exit 1
	fi
	sleep 0.5
done
grep -q '^ready ' "$dev/controlplane.out" || { echo "the control plane did not become ready in 60s" >&2; exit 1; }
grep '^ready ' "$dev/controlplane.out"
# bin/controlplane applies the CRDs; the admission policies go with them.
# The namespace is labelled as package/namespace.yaml labels it, so the
# mutating policies add Longhorn's finalizer at creation.
./bin/kubectl --kubeconfig "$kubeconfig" apply -f k8s/crds/policies/ -f k8s/crds/admission/ >/dev/null
./bin/kubectl --kubeconfig "$kubeconfig" label --overwrite namespace longhorn-system longhorn.io/manager-namespace=true >/dev/null

cat <<MSG

  kubectl:  export KUBECONFIG=$PWD/$kubeconfig; bin/kubectl get longhorn -n longhorn-system
  API:      http://$api   (try: curl http://$api/readyz)

MSG

./bin/longhorn-manager daemon --kubeconfig "$kubeconfig" --namespace longhorn-system \
	--node-name "$node" --data-dir "$PWD/$dev/disk" --api-address "$api" \
	--recurring-job-runner manager &
manager_pid=$!
trap 'kill -TERM $manager_pid 2>/dev/null; wait $manager_pid; exit 130' INT TERM
wait "$manager_pid"
