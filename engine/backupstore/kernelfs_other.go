//go:build !linux

package backupstore

// kernelFS is "" where the manager does not run: no file system is told
// apart there.
func kernelFS(string) string { return "" }
