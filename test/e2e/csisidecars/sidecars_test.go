//go:build e2e

package csisidecars

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/csi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	lhtypes "github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/v110to120"
)

// sidecarWait bounds each step the sidecars and the PersistentVolume
// controller take: a claim bound, a volume attached or deleted.
const sidecarWait = 2 * time.Minute

// sidecarEnv is a manager, the driver serving its Controller service and
// the Node service of node-1, and the real external-provisioner,
// external-attacher and external-resizer running against the test
// control plane and the driver's socket.
type sidecarEnv struct {
	*framework.APIEnv
	// prefix names the test's cluster-wide objects (StorageClasses,
	// Nodes) apart from those of any other test.
	prefix string
	// sock is the driver's socket, where a test reaches the Node service
	// as the kubelet does.
	sock string
}

func newSidecarEnv(t testing.TB, opts ...func(*app.DaemonOptions)) *sidecarEnv {
	t.Helper()
	return newSidecarEnvWith(t, nil, opts...)
}

// newSidecarEnvWith is newSidecarEnv with the manager's options and more
// flags for the external-provisioner (its --worker-threads, say).
func newSidecarEnvWith(t testing.TB, provisionerFlags []string, opts ...func(*app.DaemonOptions)) *sidecarEnv {
	t.Helper()
	bins := csiSidecars(t)
	return newSidecarEnvOn(t, bins, framework.NewAPIEnv(t, opts...), provisionerFlags)
}

// newSidecarEnvOn runs the driver and the sidecars against the manager
// of e, on e's control plane.
func newSidecarEnvOn(t testing.TB, bins csiSidecarBinaries, e *framework.APIEnv, provisionerFlags []string) *sidecarEnv {
	t.Helper()
	sock := serveCSIDriver(t, e, "node-1")
	kubeconfig := sidecarKubeconfig(t, e.Cluster)
	common := sidecarFlags(sock, kubeconfig)
	startProvisioner(t, bins, e.NS, sock, kubeconfig, provisionerFlags)
	startSidecar(t, bins.attacher, common...)
	// As package/csi.yaml runs it: the driver grows volumes in use.
	startSidecar(t, bins.resizer, append(common, "--handle-volume-inuse-error=false")...)
	s := &sidecarEnv{APIEnv: e, prefix: e.NS, sock: sock}
	// Cluster-wide objects do not go with the namespace: delete them while
	// the sidecars still run (cleanups run last first).
	t.Cleanup(func() { s.deleteClusterObjects(t) })
	return s
}

// sidecarFlags are the flags every sidecar of the tests runs with,
// against the driver's socket sock.
func sidecarFlags(sock, kubeconfig string) []string {
	return []string{"--csi-address=" + sock, "--kubeconfig=" + kubeconfig, "--leader-election=false", "-v=4", "--timeout=120s"}
}

// startProvisioner runs an external-provisioner against the driver at
// sock, as the tests run it, with provisionerFlags last.
func startProvisioner(t testing.TB, bins csiSidecarBinaries, ns, sock, kubeconfig string, provisionerFlags []string) {
	t.Helper()
	// As package/csi.yaml runs it: an Immediate claim passes no topology
	// (no CSINode says where the driver runs here, there is no kubelet).
	// NAMESPACE is where --enable-capacity keeps its CSIStorageCapacity
	// objects (the pod's namespace in package/).
	startSidecarWithEnv(t, []string{"NAMESPACE=" + ns}, bins.provisioner, append(append(sidecarFlags(sock, kubeconfig), "--immediate-topology=false"), provisionerFlags...)...)
}

func (s *sidecarEnv) deleteClusterObjects(t testing.TB) {
	ctx := context.Background()
	storage := s.Kube.StorageV1()
	if scs, err := storage.StorageClasses().List(ctx, metav1.ListOptions{}); err == nil {
		for _, sc := range scs.Items {
			if strings.HasPrefix(sc.Name, s.prefix) {
				_ = storage.StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{})
			}
		}
	}
	if vas, err := storage.VolumeAttachments().List(ctx, metav1.ListOptions{}); err == nil {
		for _, va := range vas.Items {
			if strings.HasPrefix(va.Name, s.prefix) {
				_ = storage.VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{})
			}
		}
	}
	if list, err := storage.CSINodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, s.prefix) {
				_ = storage.CSINodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
	}
	if list, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, s.prefix) {
				_ = s.Kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
	}
	// A claim the test left is deleted so the provisioner deletes its
	// volume; a volume still left then is deleted here, finalizers and all.
	_ = s.Kube.CoreV1().PersistentVolumeClaims(s.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	leftover := func() []corev1.PersistentVolume {
		var out []corev1.PersistentVolume
		pvs, err := s.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == s.NS {
				out = append(out, pv)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(leftover()) > 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	for _, pv := range leftover() {
		_, _ = s.Kube.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = s.Kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	}
}

// storageClass makes a StorageClass of the driver with these parameters,
// one replica unless they say otherwise, reclaim policy Delete.
func (s *sidecarEnv) storageClass(t testing.TB, name string, params map[string]string) string {
	t.Helper()
	return s.storageClassWith(t, name, params, nil)
}

// storageClassWith is storageClass changed by edit before it is made.
func (s *sidecarEnv) storageClassWith(t testing.TB, name string, params map[string]string, edit func(*storagev1.StorageClass)) string {
	t.Helper()
	if _, ok := params["numberOfReplicas"]; !ok {
		params["numberOfReplicas"] = "1"
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	binding := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: s.prefix + "-" + name},
		Provisioner:       csi.DriverName,
		Parameters:        params,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &binding,
	}
	if edit != nil {
		edit(sc)
	}
	if _, err := s.Kube.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return sc.Name
}

// claim makes a 16 MiB ReadWriteOnce PVC of the StorageClass.
func (s *sidecarEnv) claim(t *testing.T, name, storageClass string) {
	t.Helper()
	s.claimOf(t, name, storageClass, 16<<20)
}

// claimOf makes a ReadWriteOnce PVC of the StorageClass asking for size
// bytes.
func (s *sidecarEnv) claimOf(t *testing.T, name, storageClass string, size int64) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &storageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitBound waits until the claim is Bound and returns its
// PersistentVolume, checked to be the driver's and on node-1.
func (s *sidecarEnv) waitBound(t *testing.T, claim string) *corev1.PersistentVolume {
	t.Helper()
	return s.waitBoundOn(t, claim, "node-1")
}

// waitBoundOn is waitBound for a volume on the Longhorn node node.
func (s *sidecarEnv) waitBoundOn(t *testing.T, claim, node string) *corev1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	var pvc *corev1.PersistentVolumeClaim
	deadline := time.Now().Add(sidecarWait)
	for {
		var err error
		pvc, err = s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pvc.Status.Phase == corev1.ClaimBound {
			break
		}
		if time.Now().After(deadline) {
			// The binder hands the claim to the provisioner by this
			// annotation: without it, no binder runs.
			if pvc.Annotations["volume.kubernetes.io/storage-provisioner"] == "" {
				t.Fatalf("PVC %s not Bound in %s and never handed to a provisioner: the control plane runs no PersistentVolume binder (see testcluster.Controllers)", claim, sidecarWait)
			}
			t.Fatalf("PVC %s not Bound in %s: %s, volume %q", claim, sidecarWait, pvc.Status.Phase, pvc.Spec.VolumeName)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pv, err := s.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csi.DriverName || pv.Spec.CSI.VolumeHandle == "" {
		t.Fatalf("PV %s of PVC %s is not the driver's: %+v", pv.Name, claim, pv.Spec.PersistentVolumeSource)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("PV %s: reclaim policy %s, want Delete", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
	}
	// The volume attaches only where its replicas are: node-1, whose
	// manager made them, unless the claim asked for another node. The PV
	// sends the pods that use it there.
	if na := pv.Spec.NodeAffinity; na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) != 1 ||
		len(na.Required.NodeSelectorTerms[0].MatchExpressions) != 1 ||
		na.Required.NodeSelectorTerms[0].MatchExpressions[0].Key != "kubernetes.io/hostname" ||
		!slices.Equal(na.Required.NodeSelectorTerms[0].MatchExpressions[0].Values, []string{node}) {
		t.Errorf("PV %s's node affinity: %+v, want kubernetes.io/hostname in [%s]", pv.Name, na, node)
	}
	return pv
}

// volume is the Longhorn Volume a PV's handle names.
func (s *sidecarEnv) volume(t *testing.T, pv *corev1.PersistentVolume) *longhorn.Volume {
	t.Helper()
	v, err := s.LH.LonghornV1beta2().Volumes(s.NS).Get(context.Background(), pv.Spec.CSI.VolumeHandle, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Volume of PV %s (handle %s): %v", pv.Name, pv.Spec.CSI.VolumeHandle, err)
	}
	return v
}

// jobLabels are the volume's recurring-job and recurring-job-group
// labels, once the volume has settled (detached): the default group is
// added, when it is, by the volume's controller.
func (s *sidecarEnv) jobLabels(t *testing.T, name string) map[string]string {
	t.Helper()
	s.WaitVolumeFor(t, sidecarWait, name, "volume "+name+" detached", func(v map[string]any) bool { return v["state"] == "detached" })
	v, err := s.LH.LonghornV1beta2().Volumes(s.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, val := range v.Labels {
		if strings.HasPrefix(k, lhtypes.RecurringJobLabelPrefix) || strings.HasPrefix(k, lhtypes.RecurringJobGroupLabelPrefix) {
			out[k] = val
		}
	}
	return out
}

func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: job labels %v, want %v", what, got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: job labels %v, want %v", what, got, want)
			return
		}
	}
}

// TestCSISidecarsProvisionAttachAndDelete runs Kubernetes' own
// external-provisioner and external-attacher, built from their modules,
// against the driver on a real manager and control plane, the
// PersistentVolume controllers of kube-controller-manager binding what
// they make: StorageClass parameters reach the Volume, a
// VolumeAttachment attaches and detaches it, deleting the claim deletes
// the Volume and its replicas' data, and a malformed parameter leaves
// the claim Pending with the provisioner's event naming it.
func TestCSISidecarsProvisionAttachAndDelete(t *testing.T) {
	s := newSidecarEnv(t)
	ctx := context.Background()
	s.Call(t, "POST", "/v1/recurringjobs", `{"name":"snap-hourly","task":"snapshot","cron":"0 * * * *","retain":2}`).Expect(t, 200)
	s.Call(t, "POST", "/v1/recurringjobs", `{"name":"back-nightly","task":"backup","cron":"0 3 * * *","retain":7,"groups":["gold"]}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "the jobs in the manager's cache", func() (bool, error) {
		return s.Call(t, "GET", "/v1/recurringjobs/back-nightly", "").Status == 200 && s.Call(t, "GET", "/v1/recurringjobs/snap-hourly", "").Status == 200, nil
	})
	var bound []*corev1.PersistentVolume
	// written is the volume the test wrote data to while attached.
	var written string

	t.Run("recurringJobSelector", func(t *testing.T) {
		sc := s.storageClass(t, "selector", map[string]string{
			"recurringJobSelector": `[{"name":"snap-hourly","isGroup":false},{"name":"gold","isGroup":true}]`,
		})
		s.claim(t, "selected", sc)
		pv := s.waitBound(t, "selected")
		bound = append(bound, pv)
		v := s.volume(t, pv)
		if v.Spec.NumberOfReplicas != 1 || v.Spec.Size < 16<<20 {
			t.Errorf("volume %s: %d replicas of %d bytes, want the StorageClass's 1 and the claim's 16 MiB", v.Name, v.Spec.NumberOfReplicas, v.Spec.Size)
		}
		checkLabels(t, "volume "+v.Name, s.jobLabels(t, v.Name), map[string]string{
			lhtypes.RecurringJobLabelPrefix + "snap-hourly": "enabled",
			lhtypes.RecurringJobGroupLabelPrefix + "gold":   "enabled",
		})
	})

	t.Run("old recurringJobs make their job once", func(t *testing.T) {
		entry := longhorn.VolumeRecurringJobSpec{Name: "weekly", Task: "backup", Cron: "0 4 * * 0", Retain: 4, Labels: map[string]string{"tier": "db"}}
		job, err := v110to120.JobName(entry)
		if err != nil {
			t.Fatal(err)
		}
		old := `[{"name":"weekly","task":"backup","cron":"0 4 * * 0","retain":4,"labels":{"tier":"db"}}]`
		// Two StorageClasses name the same job; their claims are
		// provisioned at once.
		a := s.storageClass(t, "old-a", map[string]string{"recurringJobs": old})
		b := s.storageClass(t, "old-b", map[string]string{"recurringJobs": "- name: weekly\n  task: backup\n  cron: \"0 4 * * 0\"\n  retain: 4\n  labels:\n    tier: db\n"})
		s.claim(t, "old-a", a)
		s.claim(t, "old-b", b)
		for _, claim := range []string{"old-a", "old-b"} {
			pv := s.waitBound(t, claim)
			bound = append(bound, pv)
			checkLabels(t, "volume of "+claim, s.jobLabels(t, pv.Spec.CSI.VolumeHandle), map[string]string{lhtypes.RecurringJobLabelPrefix + job: "enabled"})
		}
		jobs, err := s.LH.LonghornV1beta2().RecurringJobs(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Name)
			if j.Name == job && (string(j.Spec.Task) != "backup" || j.Spec.Cron != "0 4 * * 0" || j.Spec.Retain != 4 || j.Spec.Labels["tier"] != "db") {
				t.Errorf("RecurringJob %s: %+v, not the StorageClasses' entry", j.Name, j.Spec)
			}
		}
		want := []string{"back-nightly", job, "snap-hourly"}
		sort.Strings(names)
		sort.Strings(want)
		if strings.Join(names, ",") != strings.Join(want, ",") {
			t.Errorf("RecurringJobs %v, want %v: one made for both StorageClasses", names, want)
		}
	})

	t.Run("VolumeAttachment attaches and its deletion detaches", func(t *testing.T) {
		sc := s.storageClass(t, "plain", map[string]string{})
		s.claim(t, "plain", sc)
		pv := s.waitBound(t, "plain")
		bound = append(bound, pv)
		name := pv.Spec.CSI.VolumeHandle
		// With no jobs named, the volume is in the default group: what
		// the StorageClasses above name replaces it.
		checkLabels(t, "volume "+name+" of a StorageClass naming no job", s.jobLabels(t, name), map[string]string{lhtypes.RecurringJobGroupLabelPrefix + "default": "enabled"})

		// The Kubernetes node the pod would run on, and its CSINode, which
		// tells the attacher the driver's ID for it: the Longhorn node.
		node := s.prefix + "-node"
		if _, err := s.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Kube.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: csi.DriverName, NodeID: "node-1"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// As the attach/detach controller makes it for a pod on node.
		pvName := pv.Name
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: s.prefix + "-va"},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: csi.DriverName,
				NodeName: node,
				Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName},
			},
		}
		if _, err := s.Kube.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, sidecarWait, "VolumeAttachment attached", func() (bool, error) {
			got, err := s.Kube.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if e := got.Status.AttachError; e != nil {
				t.Logf("attach error: %s", e.Message)
			}
			return got.Status.Attached, nil
		})
		v := s.WaitVolumeFor(t, 10*time.Second, name, "volume attached on node-1", func(v map[string]any) bool {
			return v["state"] == "attached" && v["currentNodeID"] == "node-1"
		})
		// The attached volume serves its data: write some, so the claim's
		// deletion below has data to delete.
		endpoint, _ := v["endpoint"].(string)
		if endpoint == "" {
			t.Fatalf("volume %s attached with no endpoint: %v", name, v)
		}
		framework.QemuIO(t, endpoint, "write -P 0x6c 0 1M", "flush")
		written = name

		if err := s.Kube.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, sidecarWait, "VolumeAttachment gone once detached", func() (bool, error) {
			_, err := s.Kube.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		s.WaitVolumeFor(t, 10*time.Second, name, "volume detached", func(v map[string]any) bool {
			return v["state"] == "detached" && v["currentNodeID"] == ""
		})
	})

	t.Run("malformed recurringJobSelector", func(t *testing.T) {
		before, err := s.LH.LonghornV1beta2().Volumes(s.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sc := s.storageClass(t, "malformed", map[string]string{"recurringJobSelector": `[{"name":"snap-hourly","isGroup":false}`})
		s.claim(t, "malformed", sc)
		s.claimRefused(t, "malformed", len(before.Items), "InvalidArgument", "recurringJobSelector")
		if err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Delete(ctx, "malformed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("deleting the claims deletes the Volumes and their data", func(t *testing.T) {
		if len(bound) == 0 {
			t.Skip("no claim was bound")
		}
		for _, pv := range bound {
			name := pv.Spec.CSI.VolumeHandle
			replicas, err := s.LH.LonghornV1beta2().Replicas(s.NS).List(ctx, metav1.ListOptions{LabelSelector: lhtypes.LabelVolume + "=" + name})
			if err != nil {
				t.Fatal(err)
			}
			var dirs []string
			for _, r := range replicas.Items {
				dirs = append(dirs, filepath.Join(r.Spec.DiskPath, "replicas", r.Spec.DataDirectoryName))
			}
			if len(dirs) == 0 {
				t.Errorf("volume %s has no replicas", name)
			}
			// A replica's files are made when its volume is first attached.
			if name == written {
				for _, d := range dirs {
					if _, err := os.Stat(d); err != nil {
						t.Errorf("replica data of %s, written while attached: %v", name, err)
					}
				}
			}
			claim := pv.Spec.ClaimRef.Name
			if err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, sidecarWait, "PV "+pv.Name+" of "+claim+" deleted", func() (bool, error) {
				_, err := s.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			framework.Eventually(t, sidecarWait, "Volume "+name+" deleted", func() (bool, error) {
				_, err := s.LH.LonghornV1beta2().Volumes(s.NS).Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			framework.Eventually(t, sidecarWait, "the replica data of "+name+" removed", func() (bool, error) {
				for _, d := range dirs {
					if _, err := os.Stat(d); !os.IsNotExist(err) {
						return false, nil
					}
				}
				return true, nil
			})
		}
	})
}

// provisioningFailed waits for the provisioner's ProvisioningFailed event
// on the claim and returns its message.
func (s *sidecarEnv) provisioningFailed(t *testing.T, claim string) string {
	t.Helper()
	var message string
	framework.Eventually(t, sidecarWait, "a ProvisioningFailed event on claim "+claim, func() (bool, error) {
		events, err := s.Kube.CoreV1().Events(s.NS).List(context.Background(), metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": claim, "reason": "ProvisioningFailed"}.String()})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		message = events.Items[0].Message
		return true, nil
	})
	return message
}

// claimRefused checks that the driver refused claim: a ProvisioningFailed
// event saying each of wants, the claim Pending with no volume, and no
// Volume made (there were volumesBefore).
func (s *sidecarEnv) claimRefused(t *testing.T, claim string, volumesBefore int, wants ...string) {
	t.Helper()
	ctx := context.Background()
	message := s.provisioningFailed(t, claim)
	t.Logf("the provisioner's event: %s", message)
	for _, want := range wants {
		if !strings.Contains(message, want) {
			t.Errorf("ProvisioningFailed event %q does not say %q", message, want)
		}
	}
	pvc, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Errorf("claim %s %s, volume %q: want Pending with none", claim, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	after, err := s.LH.LonghornV1beta2().Volumes(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != volumesBefore {
		t.Errorf("%d Volumes before the claim, %d after: a refused claim made one", volumesBefore, len(after.Items))
	}
}
