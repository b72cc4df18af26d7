//go:build e2e

package csisidecars

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// boundClaim makes a PersistentVolume of the Longhorn volume (the CSI
// driver's, as the provisioner would) and a claim bound to it, and waits
// until the control plane's PV binder says both are Bound. The PV is
// Retain, so deleting the claim leaves it Released.
func boundClaim(t *testing.T, kube kubernetes.Interface, ns, volume, claim string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	pvName := "pv-" + volume
	size := resource.MustParse("4Mi")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: csi.DriverName, VolumeHandle: volume, FSType: "ext4"}},
		},
	}
	if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the claim bound to the volume's PV", func() (bool, error) {
		got, err := kube.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.VolumeBound, err
	})
}

// jobLabels is the recurring-job selection labels of a volume's labels.
func jobLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if types.IsRecurringJobSelectionLabel(k) {
			out[k] = v
		}
	}
	return out
}

// TestClaimLabelsAreTheVolumesJobLabels: a claim labelled
// recurring-job.longhorn.io/source: enabled gives its volume its job and
// group labels, and each change of them on the claim reaches the volume
// (the default group when the claim selects nothing); the volume's
// kubernetesStatus names its PV and claim, also through the API. A volume
// whose claim is not the source keeps the labels set on the volume.
func TestClaimLabelsAreTheVolumesJobLabels(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	lh := framework.LHClient(t, cluster.Config)
	ctx := context.Background()
	d := framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", t.TempDir())
	e := &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: lh}, Base: "http://" + d.APIAddress}
	e.CreateJob(t, "daily", longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 1 * * *", Retain: 2, Concurrency: 1, Groups: []string{"gold"}})
	e.CreateJob(t, "weekly", longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 1 * * 0", Retain: 2, Concurrency: 1})
	// PVs are cluster-wide: the volumes' names are the namespace's own.
	suffix := ns[strings.LastIndex(ns, "-")+1:]
	source, kept := "claimed-"+suffix, "kept-"+suffix
	for _, name := range []string{source, kept} {
		e.Call(t, "POST", "/v1/volumes", fmt.Sprintf(`{"name":%q,"size":"4Mi","numberOfReplicas":1}`, name)).Expect(t, 200)
		e.WaitVolume(t, name, "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	}
	const enabled = types.LabelValueEnabled
	daily, weekly := types.RecurringJobLabelKey("daily"), types.RecurringJobLabelKey("weekly")
	gold, deflt := types.RecurringJobGroupLabelKey("gold"), types.RecurringJobGroupLabelKey(types.RecurringJobGroupDefault)
	volumeJobs := func(name string, want map[string]string) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, fmt.Sprintf("volume %s's job labels %v", name, want), func() (bool, error) {
			v, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return maps.Equal(jobLabels(v.Labels), want), nil
		})
	}

	boundClaim(t, kube, ns, source, "data", map[string]string{types.RecurringJobSourceLabel: enabled, daily: enabled, gold: enabled, "app": "db"})
	volumeJobs(source, map[string]string{daily: enabled, gold: enabled})
	framework.Eventually(t, 30*time.Second, "the volume's PV and claim in the API", func() (bool, error) {
		ks, _ := e.Call(t, "GET", "/v1/volumes/"+source, "").Expect(t, 200).Body["kubernetesStatus"].(map[string]any)
		return ks["pvName"] == "pv-"+source && ks["pvStatus"] == "Bound" && ks["namespace"] == ns && ks["pvcName"] == "data" && ks["lastPVCRefAt"] == "", nil
	})

	relabel := func(claim string, change func(map[string]string)) {
		t.Helper()
		// The PV binder writes the claim too: retried on a conflict.
		if err := datastore.RetryOnConflict(func() error {
			pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(pvc.Labels)
			_, err = kube.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("data", func(l map[string]string) { delete(l, daily); l[weekly] = enabled })
	volumeJobs(source, map[string]string{weekly: enabled, gold: enabled})
	relabel("data", func(l map[string]string) { delete(l, weekly); delete(l, gold) })
	volumeJobs(source, map[string]string{deflt: enabled})
	// A label set on the volume itself does not stay: the claim is the source.
	e.Call(t, "POST", "/v1/volumes/"+source+"?action=recurringJobAdd", `{"name":"gold","isGroup":true}`).Expect(t, 200)
	volumeJobs(source, map[string]string{deflt: enabled})

	// Not the source: the volume keeps what was set on it.
	boundClaim(t, kube, ns, kept, "other", map[string]string{daily: enabled})
	e.Call(t, "POST", "/v1/volumes/"+kept+"?action=recurringJobAdd", `{"name":"gold","isGroup":true}`).Expect(t, 200)
	volumeJobs(kept, map[string]string{gold: enabled})
	framework.Eventually(t, 30*time.Second, "the other volume's claim recorded", func() (bool, error) {
		v, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, kept, metav1.GetOptions{})
		return err == nil && v.Status.KubernetesStatus.PVCName == "other", err
	})
	volumeJobs(kept, map[string]string{gold: enabled})

	// The claim deleted: its name stays, with when it went.
	if err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "lastPVCRefAt once the claim is gone", func() (bool, error) {
		v, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, source, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ks := v.Status.KubernetesStatus
		return ks.PVStatus == string(corev1.VolumeReleased) && ks.PVCName == "data" && ks.LastPVCRefAt != "", nil
	})
}
