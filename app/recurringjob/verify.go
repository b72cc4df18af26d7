package recurringjob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// backupVerify drills the volume's newest Completed backup (the API's
// backupVerify, which the backup verify controller answers) and waits for
// the drill. It returns a reason when the volume was skipped (it has no
// Completed backup), and an error naming the first bad block when the
// backup is damaged: the run fails, and the volume's next backup is full.
// It neither attaches the volume nor touches its data; a full drill
// (the job's full-drill parameter) restores into a scratch volume of its
// own.
func (r *Runner) backupVerify(ctx context.Context, volume string, full bool) (string, error) {
	b, err := r.API.VerifyBackup(ctx, volume, "", full)
	var ae *client.APIError
	if client.IsNotFound(err) || (errors.As(err, &ae) && ae.Status == http.StatusConflict) {
		return "the volume has no Completed backup to verify", nil
	}
	if err != nil {
		return "", fmt.Errorf("ask for a drill: %w", err)
	}
	deadline := time.Now().Add(r.BackupTimeout)
	for !b.Answers() {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the drill of backup %s did not end within %s", b.Name, r.BackupTimeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		backups, err := r.API.Backups(ctx, volume)
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
	r.Log.WithFields(map[string]any{"volume": volume, "backup": b.Name, "result": v.Result, "badBlocks": v.BadBlocks, "blocksRead": v.BlocksRead, "seconds": v.DurationSeconds}).Info("Backup drill ended")
	switch v.Result {
	case longhorn.BackupVerificationPassed:
		return "", nil
	case longhorn.BackupVerificationFailed:
		return "", fmt.Errorf("backup %s is damaged: %s", b.Name, v.Message)
	}
	return "", fmt.Errorf("the drill of backup %s could not be made: %s", b.Name, v.Message)
}
