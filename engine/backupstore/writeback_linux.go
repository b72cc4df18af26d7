package backupstore

import "syscall"

// oDirect opens a file for writes that go to the device without the page
// cache (0 where the kernel has no such flag).
const oDirect = syscall.O_DIRECT
