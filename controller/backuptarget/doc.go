// Package backuptarget keeps the "default" BackupTarget and the three
// backup settings (backup-target, backup-target-credential-secret,
// backupstore-poll-interval) in step, both ways: a changed setting is
// copied into default's spec, a changed spec into the settings. Which side
// changed is decided field by field against the values both last held
// (decide.go, a pure function), so neither side's write is copied back.
// What the target's poll finds (status.available, lastSyncedAt, the
// Unavailable condition) is written by controller/backup, which polls it.
package backuptarget
