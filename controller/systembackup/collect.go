package systembackup

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// status.lastBackup), backing images and backup targets.
func (c *BackupController) collect(backups map[string]volumeBackup) (*systembackup.Contents, error) {
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
	sort.Slice(out.Settings, func(i, j int) bool { return out.Settings[i].Name < out.Settings[j].Name })
	sort.Slice(out.RecurringJobs, func(i, j int) bool { return out.RecurringJobs[i].Name < out.RecurringJobs[j].Name })
	sort.Slice(out.Volumes, func(i, j int) bool { return out.Volumes[i].Name < out.Volumes[j].Name })
	sort.Slice(out.BackingImages, func(i, j int) bool { return out.BackingImages[i].Name < out.BackingImages[j].Name })
	sort.Slice(out.BackupTargets, func(i, j int) bool { return out.BackupTargets[i].Name < out.BackupTargets[j].Name })
	return out, nil
}
