// Package systembackup is a system backup's archive and its place in a
// backup target, in Longhorn's layout: under
// backupstore/system-backups/<longhorn-version>/<name>/ a zip,
// system-backup.zip, of <name>/metadata.yaml and
// <name>/yamls/{longhorn,kubernetes}/<resource>.yaml (each a List of
// the objects), and its record, system-backup.cfg (JSON: the name,
// version, target, creation time and the zip's SHA-512).
//
// Everything read from a target is untrusted: Parse checks the archive's
// size, its entries and every object in it, and says what is wrong
// rather than panicking or returning part of it.
package systembackup
