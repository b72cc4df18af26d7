#!/usr/bin/env bash
# Runs the manager on the local control plane: starts bin/controlplane with
# its state under .dev/ (kept across runs), then the daemon, which starts
# the instance manager, and starts the daemon again whenever it stops.
# Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."

# What it makes (the control plane's data with the cluster's CA key, the
# kubeconfig, the disk's replica files) is this user's alone.
umask 077
dev=.dev
mkdir -p "$dev"
chmod 700 "$dev"
kubeconfig="$dev/kubeconfig"
node=${NODE_NAME:-$(hostname)}
api=${API_ADDRESS:-127.0.0.1:9500}

# EXTRA_NODES=N runs N more managers as nodes node-2 ... node-N+1, each
# with its own disk under $dev/node-K and its API on port 9500+K: a volume
# attaches on any of them, its engine reaching the replicas of another
# node over the replica protocol.
extra_nodes=${EXTRA_NODES:-0}
case "$extra_nodes" in
'' | *[!0-9]*) echo "EXTRA_NODES=$extra_nodes: a number of nodes, 0 to 8" >&2; exit 2 ;;
esac
[ "$extra_nodes" -le 8 ] || { echo "EXTRA_NODES=$extra_nodes: at most 8" >&2; exit 2; }

cp_pid=""
csi_pids=()
extra_pids=()
stop_instance_manager() {
	local im_pid
	im_pid=$(cat "$1/instance-manager/instance-manager.pid" 2>/dev/null || true)
	if [ -n "$im_pid" ] && kill -TERM "$im_pid" 2>/dev/null; then
		echo "stopping the instance manager of $1 (pid $im_pid)"
		while kill -0 "$im_pid" 2>/dev/null; do sleep 0.1; done
	fi
}
cleanup() {
	for pid in "${csi_pids[@]}" "${extra_pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	done
	# The instance managers outlive the managers by design; Ctrl-C stops
	# them too, and they stop the engines (their replicas synced).
	stop_instance_manager "$dev/disk"
	for k in $(seq 2 $((extra_nodes + 1))); do
		stop_instance_manager "$dev/node-$k/disk"
	done
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
# The controllers: bin/controlplane's own and the PersistentVolume ones the
# CSI driver's external-provisioner needs (as k8s/testcluster's
# Controllers; no attach/detach controller: there is no kubelet).
controllers=garbagecollector,namespace,job,cronjob,persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller
./bin/controlplane --data-dir "$dev/controlplane" --kubeconfig "$kubeconfig" \
	--crd-dir k8s/crds --namespaces longhorn-system --controllers "$controllers" > "$dev/controlplane.out" 2>&1 &
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

# The volumes' engines run in an instance manager process the daemon
# starts (or finds running) under $dev/disk/instance-manager: a manager
# that dies, or is started again, leaves every volume's I/O running.
# With one node, a volume's replicas share it (replica-soft-anti-affinity,
# set at the first start only); with extra nodes, each replica takes a
# node of its own, as Longhorn's default asks. The disk is a folder of the
# development machine's own, whose free space is everyone's: replicas are
# placed on it down to 10% free (Longhorn's default keeps 25%).
soft_anti_affinity=true
[ "$extra_nodes" -gt 0 ] && soft_anti_affinity=false
start_manager() {
	./bin/longhorn-manager daemon --kubeconfig "$kubeconfig" --namespace longhorn-system \
		--node-name "$node" --data-dir "$PWD/$dev/disk" --api-address "$api" \
		--instance-manager-runner process --default-setting "replica-soft-anti-affinity=$soft_anti_affinity" \
		--default-setting storage-minimal-available-percentage=10 \
		--recurring-job-runner manager --backup-target-file-roots "$PWD/$dev/backups" &
	manager_pid=$!
}
start_manager
trap 'kill -TERM $manager_pid 2>/dev/null; wait $manager_pid; exit 130' INT TERM
for k in $(seq 2 $((extra_nodes + 1))); do
	mkdir -p "$dev/node-$k"
	./bin/longhorn-manager daemon --kubeconfig "$kubeconfig" --namespace longhorn-system \
		--node-name "node-$k" --data-dir "$PWD/$dev/node-$k/disk" --api-address "127.0.0.1:$((9500 + k))" \
		--engine-address 127.0.0.1:0 --instance-manager-runner process --recurring-job-runner manager \
		--backup-target-file-roots "$PWD/$dev/backups" > "$dev/node-$k/manager.log" 2>&1 &
	extra_pids+=($!)
	echo "started node-$k (API http://127.0.0.1:$((9500 + k)), log $dev/node-$k/manager.log)"
done

# Ready is the daemon's /readyz: it answers once the apiserver takes a
# write of every Longhorn kind (a control plane that has just started
# refuses some for a few seconds), old data is migrated and the
# controllers run. The daemon stops by itself, saying why, if that does
# not come within --startup-retry-timeout.
echo "waiting for the manager to be ready (http://$api/readyz)"
until curl -fsS -o /dev/null --max-time 2 "http://$api/readyz" 2>/dev/null; do
	if ! kill -0 "$manager_pid" 2>/dev/null; then
		status=0
		wait "$manager_pid" || status=$?
		[ "$status" -ne 0 ] || status=1
		echo "the manager stopped before it was ready (exit status $status); see its log above" >&2
		exit "$status"
	fi
	sleep 0.5
done

# The CSI driver's Controller service and the sidecars that call it, so a
# PVC of a driver.longhorn.io StorageClass becomes Bound (no pod can mount
# it: there is no kubelet). The sidecars come from the Go module proxy and
# their first build takes minutes, so the manager does not wait for them:
# they are built and started in the background, and until then a PVC stays
# Pending. Logs are in $dev/csi/.
mkdir -p "$dev/csi"
start_csi() {
	local pids=() build=""
	# Under set -e, a kill of one that has stopped already must not end the trap.
	trap 'if [ -n "$build" ]; then kill -TERM -- "-$build" 2>/dev/null || true; fi; for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait; exit 0' TERM
	sock="$PWD/$dev/csi/csi.sock"
	./bin/longhorn-manager csi --controller --endpoint "unix://$sock" --manager-url "http://$api/v1" > "$dev/csi/driver.log" 2>&1 &
	pids+=($!)
	# In a session of its own, so that stopping it stops its go build too
	# (a trap waits for a foreground command; wait on a background one
	# does not).
	echo "CSI: its sidecars start once built (a first build takes minutes, meanwhile PVCs stay Pending; log: $dev/csi/build.log)"
	setsid nice bash scripts/build-csi-sidecars.sh > "$dev/csi/build.log" 2>&1 &
	build=$!
	if ! wait "$build"; then
		echo "CSI: building the sidecars failed, so PVCs stay Pending; see $dev/csi/build.log" >&2
		wait
		return
	fi
	build=""
	for _ in $(seq 1 40); do [ -S "$sock" ] && break; sleep 0.25; done
	# The snapshot CRDs (bin/snapshot-crds, from external-snapshotter's
	# client module) and the snapshot controller, which a cluster usually
	# runs, so a VolumeSnapshot of a PVC reaches the csi-snapshotter below.
	./bin/kubectl --kubeconfig "$kubeconfig" apply -f bin/snapshot-crds/ >/dev/null
	./bin/kubectl --kubeconfig "$kubeconfig" wait --for condition=established --timeout=60s \
		crd/volumesnapshotclasses.snapshot.storage.k8s.io crd/volumesnapshotcontents.snapshot.storage.k8s.io crd/volumesnapshots.snapshot.storage.k8s.io >/dev/null
	./bin/kubectl --kubeconfig "$kubeconfig" apply -f package/components/snapshot-classes/csi-snapshot-classes.yaml >/dev/null
	./bin/snapshot-controller --kubeconfig="$kubeconfig" --leader-election=false > "$dev/csi/snapshot-controller.log" 2>&1 &
	pids+=($!)
	for sidecar in csi-provisioner csi-attacher csi-snapshotter csi-resizer; do
		# The provisioner's --immediate-topology=false: with no kubelet no
		# CSINode says where the driver runs; the driver places a volume
		# itself and answers its node as the PV's topology. The resizer's
		# --handle-volume-inuse-error=false: the driver grows volumes in
		# use (as package/csi.yaml runs both).
		flags=""
		case $sidecar in
		csi-provisioner) flags=--immediate-topology=false ;;
		csi-resizer) flags=--handle-volume-inuse-error=false ;;
		esac
		./bin/$sidecar --csi-address="$sock" --kubeconfig="$kubeconfig" --leader-election=false --timeout=120s $flags > "$dev/csi/$sidecar.log" 2>&1 &
		pids+=($!)
	done
	echo "CSI: the provisioner, attacher, snapshotter, resizer and snapshot controller are running (logs in $dev/csi/)"
	wait
}
start_csi &
csi_pids+=($!)

cat <<MSG

  ready
  kubectl:  export KUBECONFIG=$PWD/$kubeconfig; bin/kubectl get longhorn -n longhorn-system
  API:      http://$api   (try: curl http://$api/readyz)
  CSI:      driver.longhorn.io with its provisioner, attacher, snapshotter, resizer
            and the snapshot controller; VolumeSnapshotClasses longhorn-snapshot and
            longhorn-backup (logs in $dev/csi/). On a first run their sidecars
            are still building (the log says when they run; $dev/csi/build.log).

MSG

# As the kubelet restarts the DaemonSet's container, a manager that stops
# (a crash, a kill -9 to try it) is started again; the instance manager
# and the volumes' NBD connections run on meanwhile. Only Ctrl-C stops
# everything.
while true; do
	status=0
	wait "$manager_pid" || status=$?
	if ! kill -0 "$cp_pid" 2>/dev/null; then
		echo "the manager stopped (exit status $status) and so did the control plane; stopping (its log: $dev/controlplane.out)" >&2
		exit 1
	fi
	echo "the manager stopped (exit status $status); starting it again, as the kubelet would (the volumes' engines run on in the instance manager)" >&2
	sleep 1
	start_manager
done
