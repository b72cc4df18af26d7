// Package backup holds the end-to-end tests of backups and restores on
// file:// and a real S3 server (versitygw on 127.0.0.1): listing, faults,
// untrusted targets, asynchronous restores and the backup metrics.
package backup
