//go:build !linux

package backupstore

// oDirect is 0 where writes cannot bypass the page cache: block files are
// then written through it and synced.
const oDirect = 0
