package backupverify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Scratch volumes: a full drill restores into a volume of its own,
// labelled types.LabelBackupVerifyScratch (the backup) and
// types.LabelBackupVerifyNode (the drilling node), owned by the Backup.
// Only volumes carrying the label are ever deleted here: the label is
// what this code put on what it made.

// scratchKeyPrefix starts the queue key of a scratch volume to sweep
// (other keys are Backups').
const scratchKeyPrefix = "scratch:"

// Condition of the volume controller's restore (controller/volume).
const (
	conditionRestore     = "Restore"
	reasonRestoreFailed  = "RestoreFailed"
	scratchVolumePrefix  = "drill-"
	scratchNameHashChars = 12
)

// ScratchVolumeName is the scratch volume of a backup's full drill: the
// same name each time, so a drill retried after a crash finds what the
// last one left.
func ScratchVolumeName(backup string) string {
	sum := sha256.Sum256([]byte(backup))
	return scratchVolumePrefix + hex.EncodeToString(sum[:])[:scratchNameHashChars]
}

// scratchVolume is the volume a full drill of b restores into: one
// replica, no recurring job, detached until the filesystem check.
func scratchVolume(b *longhorn.Backup, name, node string) (*longhorn.Volume, error) {
	size, err := strconv.ParseInt(b.Status.VolumeSize, 10, 64)
	if err != nil || size <= 0 {
		return nil, fmt.Errorf("the backup's volume size %q is not a size", b.Status.VolumeSize)
	}
	if b.Status.URL == "" {
		return nil, fmt.Errorf("the backup has no URL to restore from")
	}
	return &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{types.LabelBackupVerifyScratch: b.Name, types.LabelBackupVerifyNode: node},
			// Its replica on the drilling node's disks, where the drill
			// attaches it.
			Annotations: map[string]string{types.AnnotationSelectedNode: node},
			// The Backup's deletion takes the scratch volume with it,
			// should neither the drill nor a sweep have.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "Backup", Name: b.Name, UID: b.UID}},
		},
		Spec: longhorn.VolumeSpec{Size: size, NumberOfReplicas: 1, FromBackup: b.Status.URL, Frontend: longhorn.VolumeFrontendBlockDev,
			DataEngine: longhorn.DataEngineTypeV1, AccessMode: longhorn.AccessModeReadWriteOnce},
	}, nil
}

// restoreState reads a scratch volume's restore: done once it restored
// or failed, with the failure's message.
func restoreState(v *longhorn.Volume) (done bool, failed string) {
	cond := kit.GetCondition(v.Status.Conditions, conditionRestore)
	switch {
	case v.Status.RestoreInitiated && !v.Status.RestoreRequired && cond.Status == longhorn.ConditionStatusTrue:
		return true, ""
	case cond.Status == longhorn.ConditionStatusFalse && cond.Reason == reasonRestoreFailed:
		return true, cond.Message
	}
	return false, ""
}

// sweepScratch tells whether a scratch volume is to be deleted: one that
// no drill of this node runs on, made by this node or by one that is not
// Ready (its drill ended with it).
func sweepScratch(v *longhorn.Volume, active, nodeID string, nodeReady func(string) bool) bool {
	if !datastore.IsDrillScratchVolume(v) || v.DeletionTimestamp != nil || v.Name == active {
		return false
	}
	owner := v.Labels[types.LabelBackupVerifyNode]
	return owner == nodeID || owner == "" || !nodeReady(owner)
}

func (c *Controller) createScratch(ctx context.Context, b *longhorn.Backup, name string) error {
	v, err := scratchVolume(b, name, c.nodeID)
	if err != nil {
		return err
	}
	// One left by a drill cut short goes first: its restore is not this
	// drill's measure.
	if old, err := c.ds.GetVolumeFresh(ctx, name); err == nil {
		if !datastore.IsDrillScratchVolume(old) {
			return fmt.Errorf("a volume %s that is no drill's scratch volume exists; it is left alone", name)
		}
		c.deleteScratch(ctx, name, "a drill cut short left it", c.Logger.WithField("scratchVolume", name))
		if err := c.waitGone(ctx, name); err != nil {
			return err
		}
	}
	_, err = c.ds.CreateVolume(ctx, v)
	return err
}

func (c *Controller) waitGone(ctx context.Context, name string) error {
	for {
		if _, err := c.ds.GetVolumeFresh(ctx, name); apierrors.IsNotFound(err) {
			return nil
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("the scratch volume %s a drill left is not gone: %w", name, err)
		}
	}
}

// updateScratch changes the scratch volume's spec; it refuses a volume
// that is not a scratch volume.
func (c *Controller) updateScratch(ctx context.Context, name string, change func(*longhorn.Volume)) error {
	return datastore.RetryOnConflict(func() error {
		v, err := c.ds.GetVolumeFresh(ctx, name)
		if err != nil {
			return err
		}
		if !datastore.IsDrillScratchVolume(v) {
			return fmt.Errorf("volume %s is no drill's scratch volume", name)
		}
		updated := v.DeepCopy()
		change(updated)
		_, err = c.ds.UpdateVolume(ctx, updated)
		return err
	})
}

// deleteScratch deletes the scratch volume, if it is one; it logs what
// it could not do (the next sync or start tries again).
func (c *Controller) deleteScratch(ctx context.Context, name, why string, log *logrus.Entry) {
	v, err := c.ds.GetVolumeFresh(ctx, name)
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		log.WithError(err).Warn("Could not read the drill's scratch volume to delete it; the next start deletes it")
		return
	}
	if !datastore.IsDrillScratchVolume(v) || v.DeletionTimestamp != nil {
		return
	}
	// Preconditions: the volume read, labelled, and no other of its name.
	err = c.ds.DeleteVolumeUID(ctx, name, v.UID)
	if err != nil && !apierrors.IsNotFound(err) {
		log.WithError(err).Warn("Could not delete the drill's scratch volume; the next start deletes it")
		return
	}
	log.WithFields(logrus.Fields{"backup": v.Labels[types.LabelBackupVerifyScratch], "reason": why}).Info("Deleted the drill's scratch volume")
}

// syncScratch deletes a scratch volume no drill runs on: one a drill cut
// short (a crash, a restart) left behind.
func (c *Controller) syncScratch(ctx context.Context, name string) error {
	v, err := c.ds.GetVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ready := func(node string) bool {
		n, err := c.ds.GetNodeRO(node)
		return err == nil && datastore.IsNodeReady(n)
	}
	if !sweepScratch(v, c.activeScratch(), c.nodeID, ready) {
		return nil
	}
	c.deleteScratch(ctx, name, "no drill runs on it: one cut short left it", c.Logger.WithField("scratchVolume", name))
	return nil
}

func scratchKey(name string) string { return scratchKeyPrefix + name }

func parseScratchKey(key string) (string, bool) {
	return strings.CutPrefix(key, scratchKeyPrefix)
}

func (c *Controller) setActive(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = name
}

func (c *Controller) activeScratch() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}
