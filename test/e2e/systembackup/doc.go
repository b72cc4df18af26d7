// Package systembackup holds the end-to-end tests of system backups and
// restores: a system backup made on one control plane, restored on
// another pointed at the same backup target.
package systembackup
