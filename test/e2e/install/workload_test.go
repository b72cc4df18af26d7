//go:build e2enode

package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

var (
	backupsResource    = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "backups"}
	recurringJobs      = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "recurringjobs"}
	volumeSnapshotsRes = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
)

// workloadNS is the users' namespace of the workload.
const workloadNS = "shop"

// The whole path a user walks, on a real node, from the install command:
// the manager DaemonSet and the CSI driver up and registered, a
// StatefulSet whose claim the driver provisions and the kubelet mounts,
// files written in it, a recurring job's CronJob pod that backs the
// volume up to S3 with its own account's token, the pod made again over
// the same data, and a claim restored from a VolumeSnapshot of a backup
// that holds the same files.
func TestInstalledAsUsersInstallIt(t *testing.T) {
	c := cluster.Get(t)
	in := install(t, c)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	startSnapshotController(t, c)

	s3 := s3test.StartOn(t, cluster.NodeIP)
	c.Kubectl(t, "", "-n", namespace, "create", "secret", "generic", "longhorn-backup-credential",
		"--from-literal=AWS_ACCESS_KEY_ID="+s3.AccessKey, "--from-literal=AWS_SECRET_ACCESS_KEY="+s3.SecretKey,
		"--from-literal=AWS_ENDPOINTS="+s3.Endpoint)
	c.Kubectl(t, "", "-n", namespace, "patch", "lhs", "backup-target-credential-secret", "--type=merge", "-p", `{"value":"longhorn-backup-credential"}`)
	c.Kubectl(t, "", "-n", namespace, "patch", "lhs", "backup-target", "--type=merge", "-p", fmt.Sprintf(`{"value":%q}`, s3.Target("")))

	c.Kubectl(t, "", "create", "namespace", workloadNS)
	c.Kubectl(t, workload, "apply", "-f", "-")
	pod := "shop-db-0"
	waitPodReady(t, c, workloadNS, pod, 4*time.Minute)
	checkFiles(t, c, workloadNS, pod)

	t.Run("a recurring job's CronJob pod backs the volume up", func(t *testing.T) {
		volume := claimVolume(t, c, workloadNS, "data-shop-db-0")
		waitFor(t, "a Completed backup of "+volume+" by the job nightly", 4*time.Minute, func(ctx context.Context) (bool, string, error) {
			list, err := dyn.Resource(backupsResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, b := range list.Items {
				state, _, _ := unstructured.NestedString(b.Object, "status", "state")
				vol, _, _ := unstructured.NestedString(b.Object, "status", "volumeName")
				seen = append(seen, b.GetName()+"="+state)
				if vol == volume && state == "Completed" {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("backups %v", seen), nil
		}, func() string { return jobPodsDiagnosis(c) })
		// The CronJob keeps the last pods only, and a run whose minute came
		// before the volume had its label found none: a run that backed
		// the volume up says so in its pod's log (each minute's does).
		waitFor(t, "a job pod's log that names "+volume, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			logs, err := c.TryKubectl("", "-n", namespace, "logs", "-l", "recurring-job.longhorn.io=nightly", "--tail=-1", "--prefix")
			return err == nil && strings.Contains(logs, volume), logs, nil
		}, func() string { return jobPodsDiagnosis(c) })
		job, err := dyn.Resource(recurringJobs).Namespace(namespace).Get(context.Background(), "nightly", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if last, _, _ := unstructured.NestedString(job.Object, "status", "lastScheduleTime"); last == "" {
			t.Errorf("RecurringJob nightly: no status.lastScheduleTime after its run: %v", job.Object["status"])
		}
	})

	t.Run("the pod made again finds its files", func(t *testing.T) {
		c.Kubectl(t, "", "-n", workloadNS, "delete", "pod", pod, "--wait=true")
		waitPodReady(t, c, workloadNS, pod, 3*time.Minute)
		checkFiles(t, c, workloadNS, pod)
	})

	t.Run("the manager's container killed while the pod writes stops none of its I/O", func(t *testing.T) {
		checkManagerKillKeepsIO(t, c, pod)
	})

	t.Run("the manager's DaemonSet rolled while the pod writes stops none of its I/O", func(t *testing.T) {
		checkDaemonSetRollKeepsIO(t, c, pod)
	})

	t.Run("the manager upgraded to a new image while the pod writes keeps each engine where it runs until its volume detaches", func(t *testing.T) {
		checkUpgradeMovesEachEngineAtItsDetach(t, c, pod)
	})

	t.Run("the claim grown while mounted, through the resizer, grows the filesystem in the pod", func(t *testing.T) {
		before := filesystemSize(t, c, workloadNS, pod)
		c.Kubectl(t, "", "-n", workloadNS, "patch", "pvc", "data-shop-db-0", "--type=merge", "-p", `{"spec":{"resources":{"requests":{"storage":"512Mi"}}}}`)
		grown := func(ctx context.Context) (bool, string, error) {
			size := filesystemSize(t, c, workloadNS, pod)
			return size > before+128<<20, fmt.Sprintf("%d bytes", size), nil
		}
		describe := func() string {
			out, _ := c.TryKubectl("", "-n", workloadNS, "describe", "pvc", "data-shop-db-0")
			return out
		}
		if !mayResizeExt4Online() {
			// The kernel grows a mounted ext4 filesystem only for a
			// process with CAP_SYS_RESOURCE, which root lacks on some
			// machines (this one): the driver says so and grows it when
			// the volume is next staged, as the pod made again does.
			t.Log("this machine's root lacks CAP_SYS_RESOURCE: the filesystem grows when the volume is staged again")
			waitFor(t, "the volume grown by the resizer (the PV's capacity)", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
				got := strings.TrimSpace(c.Kubectl(t, "", "get", "pv", claimVolume(t, c, workloadNS, "data-shop-db-0"), "-o", "jsonpath={.spec.capacity.storage}"))
				return got == "512Mi", got, nil
			}, describe)
			c.Kubectl(t, "", "-n", workloadNS, "delete", "pod", pod, "--wait=true")
			waitPodReady(t, c, workloadNS, pod, 3*time.Minute)
		}
		waitFor(t, "the pod's filesystem larger than "+fmt.Sprint(before)+" bytes", 4*time.Minute, grown, describe)
		checkFiles(t, c, workloadNS, pod)
	})

	t.Run("Longhorn's UI through its Service lists the volume to a viewer, and nothing to no login", func(t *testing.T) {
		if !in.withUI {
			t.Skipf("Longhorn's UI is not built beside the repository (%s)", uiDist)
		}
		checkUI(t, c, claimVolume(t, c, workloadNS, "data-shop-db-0"))
	})

	t.Run("a tenant's pod is refused by the API, with or without a token of its own", func(t *testing.T) {
		checkTenantRefused(t, c)
	})

	t.Run("a claim restored from a VolumeSnapshot of a backup holds the same files", func(t *testing.T) {
		c.Kubectl(t, restored, "apply", "-f", "-")
		waitFor(t, "VolumeSnapshot shop-db-backup ready to use", 4*time.Minute, func(ctx context.Context) (bool, string, error) {
			vs, err := dyn.Resource(volumeSnapshotsRes).Namespace(workloadNS).Get(ctx, "shop-db-backup", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse")
			return ready, fmt.Sprintf("status %v", vs.Object["status"]), nil
		}, nil)
		waitPodReady(t, c, workloadNS, "shop-db-restored", 4*time.Minute)
		checkFiles(t, c, workloadNS, "shop-db-restored")
	})
}

// workload is what a user applies: a backup job in a group, a
// StorageClass that puts its volumes in the group, and a StatefulSet that
// writes three files and their checksums once, then keeps running.
const workload = `apiVersion: longhorn.io/v1beta2
kind: RecurringJob
metadata: {name: nightly, namespace: longhorn-system}
spec: {task: backup, cron: "* * * * *", retain: 2, concurrency: 1, groups: [shop]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: longhorn-shop}
provisioner: driver.longhorn.io
reclaimPolicy: Delete
volumeBindingMode: Immediate
allowVolumeExpansion: true
parameters:
  numberOfReplicas: "1"
  recurringJobSelector: '[{"name":"shop","isGroup":true}]'
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: shop-db, namespace: shop}
spec:
  serviceName: shop-db
  replicas: 1
  selector: {matchLabels: {app: shop-db}}
  template:
    metadata: {labels: {app: shop-db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: db
          image: longhorn-manager:dev
          imagePullPolicy: IfNotPresent
          command: ["sh", "-c"]
          args:
            - |
              set -e
              cd /data
              if [ ! -f SUMS ]; then
                for i in 1 2 3; do head -c 4194304 /dev/urandom > file$i; done
                sha256sum file1 file2 file3 > SUMS.tmp && sync && mv SUMS.tmp SUMS && sync
              fi
              touch /tmp/ready
              exec sleep infinity
          readinessProbe:
            exec: {command: ["test", "-f", "/tmp/ready"]}
            periodSeconds: 1
          volumeMounts:
            - {name: data, mountPath: /data}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        storageClassName: longhorn-shop
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 256Mi}}
`

// restored is a VolumeSnapshot of the claim in the longhorn-backup class
// (a backup in the target), a claim made from it (of the grown claim's
// size at least, as the provisioner asks) and a pod that mounts it.
const restored = `apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: shop-db-backup, namespace: shop}
spec: {volumeSnapshotClassName: longhorn-backup, source: {persistentVolumeClaimName: data-shop-db-0}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shop-db-restored, namespace: shop}
spec:
  storageClassName: longhorn-shop
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 512Mi}}
  dataSource: {name: shop-db-backup, kind: VolumeSnapshot, apiGroup: snapshot.storage.k8s.io}
---
apiVersion: v1
kind: Pod
metadata: {name: shop-db-restored, namespace: shop}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: db
      image: longhorn-manager:dev
      imagePullPolicy: IfNotPresent
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /data}
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: shop-db-restored}
`

// checkFiles runs sha256sum -c on the files the workload wrote, in pod.
func checkFiles(t *testing.T, c *cluster.Cluster, ns, pod string) {
	t.Helper()
	out, err := c.TryKubectl("", "-n", ns, "exec", pod, "--", "sh", "-c", "cd /data && sha256sum -c SUMS")
	if err != nil || strings.Count(out, ": OK") != 3 {
		t.Fatalf("pod %s/%s: the files do not match their checksums: %v\n%s", ns, pod, err, out)
	}
}

// mayResizeExt4Online reports whether this machine's root has
// CAP_SYS_RESOURCE (capability 24), which the kernel asks of whoever grows
// a mounted ext4 filesystem; the node plugin, privileged, has root's.
func mayResizeExt4Online() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<24) != 0
		}
	}
	return false
}

// filesystemSize is the size of the filesystem mounted at /data in pod.
func filesystemSize(t *testing.T, c *cluster.Cluster, ns, pod string) int64 {
	t.Helper()
	out := strings.TrimSpace(c.Kubectl(t, "", "-n", ns, "exec", pod, "--", "df", "-B1", "--output=size", "/data"))
	lines := strings.Split(out, "\n")
	size, err := strconv.ParseInt(strings.TrimSpace(lines[len(lines)-1]), 10, 64)
	if err != nil {
		t.Fatalf("df in %s/%s: %q: %v", ns, pod, out, err)
	}
	return size
}

// claimVolume is the Longhorn volume (the PV's name) of a bound claim.
func claimVolume(t *testing.T, c *cluster.Cluster, ns, claim string) string {
	t.Helper()
	name := strings.TrimSpace(c.Kubectl(t, "", "-n", ns, "get", "pvc", claim, "-o", "jsonpath={.spec.volumeName}"))
	if name == "" {
		t.Fatalf("claim %s/%s has no volume", ns, claim)
	}
	return name
}

func waitPodReady(t *testing.T, c *cluster.Cluster, ns, name string, timeout time.Duration) {
	t.Helper()
	client := c.KubeClient(t)
	waitFor(t, "pod "+ns+"/"+name+" ready", timeout, func(ctx context.Context) (bool, string, error) {
		pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return cluster.PodReady(pod), string(pod.Status.Phase), nil
	}, func() string { return c.PodsDiagnosis(client, ns) + c.PodsDiagnosis(client, namespace) })
}

// jobPodsDiagnosis is the recurring-job pods' state and logs, and the
// manager's.
func jobPodsDiagnosis(c *cluster.Cluster) string {
	out, _ := c.TryKubectl("", "-n", namespace, "get", "cronjobs,jobs,pods", "-o", "wide")
	logs, _ := c.TryKubectl("", "-n", namespace, "logs", "-l", "recurring-job.longhorn.io=nightly", "--tail=30", "--prefix")
	manager, _ := c.TryKubectl("", "-n", namespace, "logs", "ds/longhorn-manager", "-c", "longhorn-manager", "--tail=40")
	return out + "\njob pods:\n" + logs + "\nmanager:\n" + manager
}

// startSnapshotController runs the external-snapshotter's snapshot
// controller for the cluster, as a distribution does, with the admin
// kubeconfig, until the test ends.
func startSnapshotController(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	bin := filepath.Join(c.BinDir, "snapshot-controller")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run scripts/build-csi-sidecars.sh", bin)
	}
	logFile, err := os.Create(filepath.Join(c.DataDir, "logs", "snapshot-controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+c.Kubeconfig, "--leader-election=false", "-v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	})
}
