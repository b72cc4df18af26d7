package backup

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// defaultTargetStatus is the "default" BackupTarget's status once a poll
// of target (the backup-target setting, which default mirrors) found
// pollErr, a targetError or nil, at now; as Longhorn's: an empty URL is
// unavailable, a read that failed says why, and lastSyncedAt is the last
// poll that read the target. The owner is left as it is.
func defaultTargetStatus(cur longhorn.BackupTargetStatus, target string, pollErr error, now time.Time) longhorn.BackupTargetStatus {
	s := *cur.DeepCopy()
	const condType, reason = longhorn.BackupTargetConditionTypeUnavailable, longhorn.BackupTargetConditionReasonUnavailable
	switch {
	case target == "":
		s.Available, s.LastSyncedAt = false, metav1.Time{}
		s.Conditions = kit.SetCondition(s.Conditions, condType, longhorn.ConditionStatusTrue, reason, "backup target URL is empty", now)
	case pollErr != nil:
		s.Available = false
		s.Conditions = kit.SetCondition(s.Conditions, condType, longhorn.ConditionStatusTrue, reason, "cannot read "+target+": "+pollErr.Error(), now)
	default:
		s.Available, s.LastSyncedAt = true, metav1.NewTime(now)
		s.Conditions = kit.SetCondition(s.Conditions, condType, longhorn.ConditionStatusFalse, "", "", now)
	}
	return s
}

// recordOnTarget writes what a poll of target (its URL) found into the
// BackupTarget's status when it changed (a poll that read the target
// moves lastSyncedAt, so one write per poll). A failed write is logged,
// not retried: the next poll writes again.
func (c *TargetController) recordOnTarget(ctx context.Context, name, target string, pollErr error, now time.Time) {
	log := c.Logger.WithField("backupTarget", name)
	bt, err := c.ds.GetBackupTargetRO(name)
	if apierrors.IsNotFound(err) {
		return // controller/backuptarget makes default; another was deleted
	}
	if err != nil {
		log.WithError(err).Warn("Could not read the backup target to write the poll's result")
		return
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		status := defaultTargetStatus(bt.Status, target, pollErr, now)
		if equality.Semantic.DeepEqual(status, bt.Status) {
			return nil
		}
		updated := bt.DeepCopy()
		updated.Status = status
		_, werr := c.ds.UpdateBackupTargetStatus(ctx, updated)
		if apierrors.IsConflict(werr) {
			fresh, gerr := c.ds.GetBackupTargetFresh(ctx, name)
			if gerr != nil {
				return gerr
			}
			bt = fresh
		}
		return werr
	})
	if err != nil {
		log.WithError(err).Warn("Could not write the poll's result into the backup target's status; the next poll writes it")
	}
}
