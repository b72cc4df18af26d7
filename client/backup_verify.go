package client

import (
	"context"
	"time"
)

// BackupVerification is what a drill of a backup found (the API's
// backupVerification).
type BackupVerification struct {
	RequestedAt         time.Time  `json:"requestedAt"`
	RequestedFull       bool       `json:"requestedFull"`
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
// VerifyRequestedAt names the drill: wait for Answers(VerifyRequestedAt,
// full). 404 when the target holds no backup volume of the volume.
func (c *Client) VerifyBackupIn(ctx context.Context, volume, target, name string, full bool) (Backup, error) {
	var b Backup
	bv, err := c.backupVolumeIn(ctx, volume, target)
	if err != nil {
		return b, err
	}
	err = c.action(ctx, "backupvolumes", bv, "backupVerify", map[string]any{"name": name, "full": full}, &b)
	return b, err
}

// Answers tells whether the backup's verification answers the drill asked
// at askedAt (the VerifyRequestedAt that VerifyBackup returned), a full
// one when full: a drill made for that request or a later one, and full
// when a full one was asked. A drill of the blocks alone never answers a
// full request, whatever its time. (A verification written before drills
// recorded what they were asked is full when it holds a full drill's
// findings.)
func (b Backup) Answers(askedAt string, full bool) bool {
	v := b.Verification
	if v == nil || askedAt == "" {
		return false
	}
	asked, err := time.Parse(time.RFC3339, askedAt)
	if err != nil || v.RequestedAt.Before(asked) {
		return false
	}
	return !full || v.RequestedFull || v.Full != nil
}
