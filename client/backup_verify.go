package client

import (
	"context"
	"time"
)

// BackupVerification is what a drill of a backup found (the API's
// backupVerification).
type BackupVerification struct {
	RequestedAt         time.Time  `json:"requestedAt"`
	VerifiedAt          time.Time  `json:"verifiedAt"`
	Result              string     `json:"result"`
	Message             string     `json:"message"`
	BadBlocks           int        `json:"badBlocks"`
	FirstBadBlockOffset *int64     `json:"firstBadBlockOffset"`
	FirstBadBlockReason string     `json:"firstBadBlockReason"`
	Digest              string     `json:"digest"`
	BlocksRead          int        `json:"blocksRead"`
	DurationSeconds     string     `json:"durationSeconds"`
	Full                *FullDrill `json:"full"`
}

// FullDrill is what a full drill found past the blocks (the API's
// backupFullDrill).
type FullDrill struct {
	ScratchVolume         string `json:"scratchVolume"`
	Restored              bool   `json:"restored"`
	RestoreSeconds        string `json:"restoreSeconds"`
	Filesystem            string `json:"filesystem"`
	FilesystemCheck       string `json:"filesystemCheck"`
	FilesystemCheckOutput string `json:"filesystemCheckOutput"`
}

// VerifyBackupIn asks for a drill of a backup of volume in the
// BackupTarget target ("" is default), its newest Completed backup when
// name is empty, a full one when full, and returns the backup, whose
// VerifyRequestedAt names the drill. 404 when the target holds no backup
// volume of the volume.
func (c *Client) VerifyBackupIn(ctx context.Context, volume, target, name string, full bool) (Backup, error) {
	var b Backup
	bv, err := c.backupVolumeIn(ctx, volume, target)
	if err != nil {
		return b, err
	}
	err = c.action(ctx, "backupvolumes", bv, "backupVerify", map[string]any{"name": name, "full": full}, &b)
	return b, err
}

// Answers tells whether the backup's verification is the drill its
// VerifyRequestedAt asked for (or a later one).
func (b Backup) Answers() bool {
	if b.Verification == nil || b.VerifyRequestedAt == "" {
		return false
	}
	asked, err := time.Parse(time.RFC3339, b.VerifyRequestedAt)
	return err == nil && !b.Verification.RequestedAt.Before(asked)
}
