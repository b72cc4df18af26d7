package systembackup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
)

// archived is the metadata an object is archived with: what a create
// takes (name, labels, annotations), not what the apiserver or this
// cluster's controllers gave it.
func archived(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations}
}

// collect gathers Longhorn's own objects from the cache: settings,
// recurring jobs, volumes (each with the backup it is restored from in
// status.lastBackup; not the drills' scratch volumes), backing images
// and backup targets.
func (c *BackupController) collect(ctx context.Context, backups map[string]volumeBackup) (*systembackup.Contents, error) {
	out := &systembackup.Contents{}
	settings, err := c.ds.ListSettingsRO()
	if err != nil {
		return nil, err
	}
	for _, s := range settings {
		out.Settings = append(out.Settings, longhorn.Setting{ObjectMeta: archived(s.ObjectMeta), Value: s.Value})
	}
	jobs, err := c.ds.ListRecurringJobsRO()
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		out.RecurringJobs = append(out.RecurringJobs, longhorn.RecurringJob{ObjectMeta: archived(j.ObjectMeta), Spec: j.Spec})
	}
	vols, err := c.ds.ListVolumesRO(everything)
	if err != nil {
		return nil, err
	}
	for _, v := range vols {
		if datastore.IsDrillScratchVolume(v) {
			// A drill's scratch volume holds a copy of a backup, made and
			// swept by the backup verify controller: restored from an
			// archive, it would be owned by nothing and never swept.
			continue
		}
		a := longhorn.Volume{ObjectMeta: archived(v.ObjectMeta), Spec: *v.Spec.DeepCopy()}
		// Attachment is this cluster's; the restored volume starts
		// detached, restoring.
		a.Spec.NodeID = ""
		if b, ok := backups[v.Name]; ok {
			a.Status.LastBackup, a.Status.LastBackupAt = b.name, b.at
		}
		out.Volumes = append(out.Volumes, a)
	}
	images, err := c.ds.ListBackingImagesRO()
	if err != nil {
		return nil, err
	}
	for _, bi := range images {
		out.BackingImages = append(out.BackingImages, longhorn.BackingImage{ObjectMeta: archived(bi.ObjectMeta), Spec: *bi.Spec.DeepCopy()})
	}
	targets, err := c.ds.ListBackupTargetsRO()
	if err != nil {
		return nil, err
	}
	for _, bt := range targets {
		out.BackupTargets = append(out.BackupTargets, longhorn.BackupTarget{ObjectMeta: archived(bt.ObjectMeta), Spec: bt.Spec})
	}
	if err := c.collectClaims(ctx, out); err != nil {
		return nil, err
	}
	sort.Slice(out.Settings, func(i, j int) bool { return out.Settings[i].Name < out.Settings[j].Name })
	sort.Slice(out.RecurringJobs, func(i, j int) bool { return out.RecurringJobs[i].Name < out.RecurringJobs[j].Name })
	sort.Slice(out.Volumes, func(i, j int) bool { return out.Volumes[i].Name < out.Volumes[j].Name })
	sort.Slice(out.BackingImages, func(i, j int) bool { return out.BackingImages[i].Name < out.BackingImages[j].Name })
	sort.Slice(out.BackupTargets, func(i, j int) bool { return out.BackupTargets[i].Name < out.BackupTargets[j].Name })
	return out, nil
}

// collectClaims adds the PersistentVolumes of the archived volumes (of
// the Longhorn CSI driver) and the claims bound to them, as a create
// takes them: a PV's claimRef without the claim's UID, so that the
// claim made again binds to it.
func (c *BackupController) collectClaims(ctx context.Context, out *systembackup.Contents) error {
	volumes := map[string]bool{}
	for _, v := range out.Volumes {
		volumes[v.Name] = true
	}
	pvs, err := c.ds.ListPersistentVolumes(ctx)
	if err != nil {
		return fmt.Errorf("list PersistentVolumes: %w", err)
	}
	sort.Slice(pvs, func(i, j int) bool { return pvs[i].Name < pvs[j].Name })
	for _, pv := range pvs {
		csi := pv.Spec.CSI
		if csi == nil || csi.Driver != systembackup.CSIDriver || !volumes[csi.VolumeHandle] {
			continue
		}
		a := corev1.PersistentVolume{ObjectMeta: withoutBinding(archived(pv.ObjectMeta)), Spec: *pv.Spec.DeepCopy()}
		a.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{CSI: a.Spec.CSI}
		ref := pv.Spec.ClaimRef
		a.Spec.ClaimRef = nil
		if ref != nil {
			a.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ref.Namespace, Name: ref.Name}
		}
		out.PersistentVolumes = append(out.PersistentVolumes, a)
		if ref == nil || pv.Status.Phase != corev1.VolumeBound {
			continue
		}
		pvc, err := c.ds.GetPersistentVolumeClaim(ctx, ref.Namespace, ref.Name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read PersistentVolumeClaim %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		if pvc.Spec.VolumeName != pv.Name {
			continue
		}
		out.PersistentVolumeClaims = append(out.PersistentVolumeClaims, corev1.PersistentVolumeClaim{ObjectMeta: withoutBinding(archived(pvc.ObjectMeta)), Spec: claimSpec(pvc.Spec)})
	}
	return nil
}

// claimSpec is what a claim is archived and made again with: its
// binding to its PV and its request, not a data source.
func claimSpec(s corev1.PersistentVolumeClaimSpec) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{AccessModes: s.AccessModes, Resources: s.Resources,
		VolumeName: s.VolumeName, StorageClassName: s.StorageClassName, VolumeMode: s.VolumeMode}
}

// withoutBinding is a PV's or a claim's metadata without the binder's
// annotations (pv.kubernetes.io/bind-completed, bound-by-controller...):
// a claim made again with them is taken for one whose volume was lost.
func withoutBinding(m metav1.ObjectMeta) metav1.ObjectMeta {
	var kept map[string]string
	for k, v := range m.Annotations {
		if strings.HasPrefix(k, "pv.kubernetes.io/") {
			continue
		}
		if kept == nil {
			kept = map[string]string{}
		}
		kept[k] = v
	}
	m.Annotations = kept
	return m
}
