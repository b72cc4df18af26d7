package device

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cadence-storage/longhorn-manager/internal/mountinfo"
)

// health says why the device r records no longer stands, "" when it does:
// its nbdfuse runs and is connected to the export, its FUSE mount is there
// and its loop device reads it. An nbdfuse whose engine stopped runs on,
// answering every read with an error, so its connection is looked at too
// (without any I/O, which could hang).
func health(r *Record) string {
	switch {
	case r.Device == "":
		return "its loop device was not made"
	case !isOurNbdfuse(r):
		return fmt.Sprintf("its nbdfuse (pid %d) no longer runs", r.NbdfusePID)
	case !isMountPoint(r.FuseDir):
		return fmt.Sprintf("nbdfuse's FUSE mount at %s is gone", r.FuseDir)
	case loopBackingFile(r.Device) != r.FuseFile:
		return fmt.Sprintf("loop device %s no longer reads %s", r.Device, r.FuseFile)
	case !connected(r.NbdfusePID, r.Endpoint):
		return fmt.Sprintf("its nbdfuse is no longer connected to %s (the engine's export stopped)", r.Endpoint)
	}
	return ""
}

// isOurNbdfuse says whether r's nbdfuse still runs: the pid is alive and
// is nbdfuse serving r's file, not a process that took the pid over.
func isOurNbdfuse(r *Record) bool {
	if r.NbdfusePID <= 1 || r.FuseFile == "" {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(r.NbdfusePID) + "/cmdline")
	if err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(r.NbdfusePID) + "/stat")
	if err != nil || procState(stat) == "Z" {
		return false
	}
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	if len(args) == 0 || filepath.Base(string(args[0])) != "nbdfuse" {
		return false
	}
	for _, a := range args[1:] {
		if string(a) == r.FuseFile {
			return true
		}
	}
	return false
}

// procState is the state letter of a /proc/PID/stat.
func procState(stat []byte) string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return ""
	}
	return string(stat[i+2])
}

// connected says whether process pid's TCP connections to endpoint's
// port are all established (at least one): a connection whose server
// went away is CLOSE_WAIT, or gone.
func connected(pid int, endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Port() == "" {
		return false
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil {
		return false
	}
	inodes := socketInodes(pid)
	if len(inodes) == 0 {
		return false
	}
	established, other := 0, 0
	for _, file := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local rem st tx:rx tr:tm retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || !inodes[fields[9]] {
				continue
			}
			_, remPort, ok := strings.Cut(fields[2], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(remPort, 16, 16); err != nil || p != port {
				continue
			}
			if fields[3] == "01" {
				established++
			} else {
				other++
			}
		}
		f.Close()
	}
	return established > 0 && other == 0
}

// socketInodes are the inodes of the sockets process pid holds.
func socketInodes(pid int) map[string]bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			out[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	return out
}

// isMountPoint says whether something is mounted at path in this
// process's mount namespace.
func isMountPoint(path string) bool {
	if path == "" {
		return false
	}
	list, err := mountinfo.Self()
	if err != nil {
		return false
	}
	path = canonical(path)
	for _, m := range list {
		if m.Point == path {
			return true
		}
	}
	return false
}

// canonical is path made absolute with its folder's symlinks resolved, as
// the kernel lists mount points. The path itself is not resolved: a FUSE
// mount whose nbdfuse died answers no stat.
func canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(real, filepath.Base(abs))
	}
	return abs
}
