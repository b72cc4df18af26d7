package backupverify

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestWhatADrillRecords(t *testing.T) {
	bad := []backupstore.BadBlock{{Offset: 2 << 20, Checksum: "aa", Reason: backupstore.BlockMissing}, {Offset: 6 << 20, Checksum: "bb", Reason: backupstore.BlockTruncated}}
	for _, tc := range []struct {
		name       string
		res        *backupstore.VerifyResult
		err        error
		result     string
		offset     int64 // -1: none
		reason     string
		messageHas string
	}{
		{"a whole backup passes", &backupstore.VerifyResult{Blocks: 4, BlocksRead: 4, Digest: backupstore.DigestMatched, Duration: time.Second}, nil, longhorn.BackupVerificationPassed, -1, "", ""},
		{"bad blocks fail it, naming the first by offset and reason", &backupstore.VerifyResult{Blocks: 8, BadBlocks: bad, Digest: backupstore.DigestMatched}, nil, longhorn.BackupVerificationFailed, 2 << 20, backupstore.BlockMissing, "2 of 8 blocks are bad"},
		{"an old backup without a digest passes, saying so", &backupstore.VerifyResult{Blocks: 1, Digest: backupstore.DigestAbsent}, nil, longhorn.BackupVerificationPassed, -1, "", "before snapshot digests"},
		{"a digest that does not match fails it", &backupstore.VerifyResult{Blocks: 1, Digest: backupstore.DigestMismatch, DigestError: "its block list gives the digest x"}, nil, longhorn.BackupVerificationFailed, -1, "", "digest x"},
		{"an invalid config fails it", &backupstore.VerifyResult{ConfigError: "volumeSize: invalid"}, nil, longhorn.BackupVerificationFailed, -1, "", "volumeSize"},
		{"a target that cannot be read is an error, not a verdict", nil, errors.New("connection refused"), longhorn.BackupVerificationError, -1, "", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := verification(tc.res, tc.err)
			if rec.Result != tc.result || rec.FirstBadBlockReason != tc.reason || !strings.Contains(rec.Message, tc.messageHas) {
				t.Fatalf("%+v", rec)
			}
			switch {
			case tc.offset < 0 && rec.FirstBadBlockOffset != nil:
				t.Fatalf("a first bad block at %d", *rec.FirstBadBlockOffset)
			case tc.offset >= 0 && (rec.FirstBadBlockOffset == nil || *rec.FirstBadBlockOffset != tc.offset):
				t.Fatalf("first bad block offset %v, want %d", rec.FirstBadBlockOffset, tc.offset)
			}
		})
	}
}
