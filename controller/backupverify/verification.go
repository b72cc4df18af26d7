package backupverify

import (
	"strconv"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// verification is what a drill's result (or its failure to be made, err) puts
// in a Backup's status.verification; the caller sets the times.
func verification(res *backupstore.VerifyResult, err error) longhorn.BackupVerification {
	if err != nil {
		return longhorn.BackupVerification{Result: longhorn.BackupVerificationError, Message: "the drill could not be made: " + err.Error()}
	}
	rec := longhorn.BackupVerification{
		Result: longhorn.BackupVerificationPassed, Digest: res.Digest, BlocksRead: res.BlocksRead,
		BadBlocks: len(res.BadBlocks), DurationSeconds: strconv.FormatFloat(res.Duration.Seconds(), 'f', 3, 64),
	}
	if first := res.FirstBad(); first != nil {
		off := first.Offset
		rec.FirstBadBlockOffset, rec.FirstBadBlockReason = &off, first.Reason
	}
	if !res.OK() {
		rec.Result, rec.Message = longhorn.BackupVerificationFailed, res.Problem()
		return rec
	}
	switch {
	case res.Digest == backupstore.DigestAbsent:
		rec.Message = "every block is whole; the backup was made before snapshot digests, so its block list was not checked against one"
	case res.VolumeRecordMissing:
		rec.Message = "every block is whole; the volume's record (volume.cfg) is missing from the target, and its next backup writes it again"
	}
	return rec
}

// withFullDrill adds a full drill's findings to a drill whose blocks
// passed: its result replaces the blocks' when it is worse, and its
// message is said first.
func withFullDrill(rec longhorn.BackupVerification, full *longhorn.BackupFullDrill, result, msg string) longhorn.BackupVerification {
	rec.Full = full
	if result != longhorn.BackupVerificationPassed {
		rec.Result = result
	}
	switch {
	case msg != "" && rec.Message != "":
		rec.Message = msg + "; " + rec.Message
	case msg != "":
		rec.Message = msg
	}
	return rec
}
