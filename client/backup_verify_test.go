package client

import (
	"testing"
	"time"
)

// TestABackupAnswersOnlyTheDrillItAsked: what a job waiting on a drill
// takes as its answer: the verification of its request (by time) or a
// later one, and a full one when it asked full.
func TestABackupAnswersOnlyTheDrillItAsked(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const asked = "2026-11-26T10:00:00Z"
	for _, tc := range []struct {
		name    string
		v       *BackupVerification
		askedAt string
		full    bool
		answers bool
	}{
		{"no drill yet", nil, asked, false, false},
		{"a drill of an earlier request", &BackupVerification{RequestedAt: at("2026-11-26T09:59:59Z")}, asked, false, false},
		{"the drill of the request", &BackupVerification{RequestedAt: at(asked)}, asked, false, true},
		{"a later drill", &BackupVerification{RequestedAt: at("2026-11-26T10:00:01Z")}, asked, false, true},
		{"a full request, its full drill", &BackupVerification{RequestedAt: at(asked), RequestedFull: true}, asked, true, true},
		{"a full request, a drill of the blocks alone of its time", &BackupVerification{RequestedAt: at(asked)}, asked, true, false},
		{"a full request, a later drill of the blocks alone", &BackupVerification{RequestedAt: at("2026-11-26T10:00:01Z")}, asked, true, false},
		{"a full request, a full drill recorded before drills said what they were asked", &BackupVerification{RequestedAt: at(asked), Full: &FullDrill{Restored: true}}, asked, true, true},
		{"a request of the blocks, a full drill", &BackupVerification{RequestedAt: at(asked), RequestedFull: true}, asked, false, true},
		{"no request named", &BackupVerification{RequestedAt: at(asked)}, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Backup{Verification: tc.v}).Answers(tc.askedAt, tc.full); got != tc.answers {
				t.Fatalf("Answers = %v, want %v", got, tc.answers)
			}
		})
	}
}
