package jobrun

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// backupVerify drills the volume's newest Completed backup in each
// target the job drills (drillTargets), one target after another, and
// waits for each drill. It returns a reason when the volume was skipped
// (no target holds a Completed backup of it), and an error naming each
// target whose backup is damaged or could not be drilled: the run fails
// for the volume, and its next backup is full. Each target's drill is
// recorded on its Backup and logged with the target. It neither attaches
// the volume nor touches its data; a full drill (the job's full-drill
// parameter) restores into a scratch volume of its own.
func (r *Executor) backupVerify(ctx context.Context, job *longhorn.RecurringJob, volume string, full bool) (string, error) {
	targets, err := r.drillTargets(ctx, job, volume)
	if err != nil {
		return "", err
	}
	var errs, skipped []string
	drilled := 0
	for _, target := range targets {
		skip, err := r.backupVerifyIn(ctx, volume, target, full)
		switch {
		case err != nil:
			errs = append(errs, "backup target "+target+": "+err.Error())
		case skip != "":
			skipped = append(skipped, target)
		default:
			drilled++
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) > 0 {
		return "", errors.New(strings.Join(errs, "; "))
	}
	if drilled == 0 {
		if len(targets) == 0 {
			return "the volume has no backup in any backup target", nil
		}
		return "the volume has no Completed backup to verify in backup target " + strings.Join(skipped, ", "), nil
	}
	return "", nil
}

// drillTargets are the targets whose backups of the volume the job
// drills: the job's spec.backupTargetName alone when it names one, else
// every target that holds a backup volume of it.
func (r *Executor) drillTargets(ctx context.Context, job *longhorn.RecurringJob, volume string) ([]string, error) {
	if job.Spec.BackupTargetName != "" {
		return []string{job.Spec.BackupTargetName}, nil
	}
	targets, err := r.API.BackupTargetsOf(ctx, volume)
	if err != nil {
		return nil, fmt.Errorf("list the backup targets holding backups of the volume: %w", err)
	}
	return targets, nil
}

// backupVerifyIn drills the volume's newest Completed backup in target
// (the API's backupVerify on the volume's backup volume there, which the
// backup verify controller answers) and waits for the drill. It returns
// a reason when the target holds no Completed backup of the volume.
func (r *Executor) backupVerifyIn(ctx context.Context, volume, target string, full bool) (string, error) {
	b, err := r.API.VerifyBackupIn(ctx, volume, target, "", full)
	var ae *client.APIError
	if client.IsNotFound(err) || (errors.As(err, &ae) && ae.Status == http.StatusConflict) {
		return "no Completed backup to verify", nil
	}
	if err != nil {
		return "", fmt.Errorf("ask for a drill: %w", err)
	}
	// Wait for the drill of this request, as the answer names it: its
	// time, and full when full was asked.
	asked := b.VerifyRequestedAt
	deadline := time.Now().Add(r.BackupTimeout)
	for !b.Answers(asked, full) {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the drill of backup %s did not end within %s", b.Name, r.BackupTimeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		backups, err := r.API.BackupsIn(ctx, volume, target)
		if err != nil {
			return "", err
		}
		for _, got := range backups {
			if got.Name == b.Name {
				b = got
			}
		}
	}
	v := b.Verification
	r.Log.WithFields(logrus.Fields{"volume": volume, "backupTarget": target, "backup": b.Name, "result": v.Result,
		"badBlocks": v.BadBlocks, "blocksRead": v.BlocksRead, "seconds": v.DurationSeconds}).Info("Backup drill ended")
	switch v.Result {
	case longhorn.BackupVerificationPassed:
		return "", nil
	case longhorn.BackupVerificationFailed:
		return "", fmt.Errorf("backup %s is damaged: %s", b.Name, v.Message)
	}
	return "", fmt.Errorf("the drill of backup %s could not be made: %s", b.Name, v.Message)
}
