package backupstore

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// kernelFileSystems are the file systems whose files are the kernel's
// state, by the type statfs reports: /proc (whose /proc/<pid>/root leads
// into another process's mounts, the host's from a pod that mounts the
// host's /proc), /sys and its cgroup, debug, trace, security and bpf
// file systems, and the like. No backup target lies on one.
var kernelFileSystems = map[int64]string{
	unix.PROC_SUPER_MAGIC:    "proc",
	unix.SYSFS_MAGIC:         "sysfs",
	unix.CGROUP_SUPER_MAGIC:  "cgroup",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.SECURITYFS_MAGIC:    "securityfs",
	unix.SELINUX_MAGIC:       "selinuxfs",
	unix.SMACK_MAGIC:         "smackfs",
	unix.BPF_FS_MAGIC:        "bpf",
	unix.PSTOREFS_MAGIC:      "pstore",
	unix.EFIVARFS_MAGIC:      "efivarfs",
	unix.DEVPTS_SUPER_MAGIC:  "devpts",
	unix.NSFS_MAGIC:          "nsfs",
	unix.BINFMTFS_MAGIC:      "binfmt_misc",
}

// kernelFS names the kernel file system the existing path p is on, or is
// "" for any other (or when statfs fails: the use of p then fails too).
func kernelFS(p string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return ""
	}
	return kernelFileSystems[int64(st.Type)]
}

// fileDev is the device of a file: files of one device are on one file
// system.
func fileDev(st fs.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Dev)
	}
	return 0
}
