package backupstore

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// FileRoots are the folders file:// targets may lie in, as the
// administrator lists them (the daemon's --backup-target-file-roots). The
// manager runs as root in a pod that mounts the host's /proc: a file://
// target anywhere would write root-owned files anywhere on the host (and
// a snapshotBackup would copy a volume into any folder), so a target is
// opened only inside one of these folders, its symbolic links resolved,
// and never on or through a kernel file system (see kernelFS). No roots
// means no file:// targets at all.
type FileRoots struct {
	roots []string // clean absolute paths, as given
}

// NewFileRoots checks the administrator's list: each root an absolute
// path that is not, and does not lie on or through, a kernel file
// system. A root that does not exist yet (a share to be mounted there)
// is accepted; each target is checked again when it is opened.
func NewFileRoots(roots []string) (*FileRoots, error) {
	r := &FileRoots{}
	for _, root := range roots {
		if !filepath.IsAbs(root) {
			return nil, fmt.Errorf("%q is not an absolute path", root)
		}
		root = filepath.Clean(root)
		if _, err := resolvePath(root); err != nil {
			return nil, fmt.Errorf("%q cannot hold file:// targets: %w", root, err)
		}
		r.roots = append(r.roots, root)
	}
	return r, nil
}

// Roots returns the folders, as given.
func (r *FileRoots) Roots() []string { return append([]string(nil), r.roots...) }

// Resolve returns the folder a file:// target's absolute path p really
// is (cleaned, its symbolic links resolved as far as it exists), or why
// it is refused: outside every root, or on or through a kernel file
// system.
func (r *FileRoots) Resolve(p string) (string, error) {
	if len(r.roots) == 0 {
		return "", errors.New("file:// targets are off on this manager: its administrator lists the folders they may use with the daemon's --backup-target-file-roots (see docs/deploying.md)")
	}
	p = filepath.Clean(p)
	real, err := resolvePath(p)
	if err != nil {
		return "", err
	}
	for _, root := range r.roots {
		if realRoot, err := resolvePath(root); err == nil && within(real, realRoot) {
			return real, nil
		}
	}
	where := p
	if real != p {
		where = fmt.Sprintf("%s (which resolves to %s)", p, real)
	}
	return "", fmt.Errorf("%s is outside the folders file:// targets may use on this manager (%s); its administrator lists them with the daemon's --backup-target-file-roots", where, strings.Join(r.roots, ", "))
}

// within reports whether the clean absolute path p is root or lies in it.
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// maxLinks is how many symbolic links resolvePath follows, as the kernel's
// limit (ELOOP).
const maxLinks = 40

// resolvePath resolves the symbolic links of the clean absolute path p as
// far as it exists, and appends the rest as written, as the kernel would
// walk it; it refuses a path that reaches a folder on a kernel file
// system on the way (so /host/proc/1/root/etc is refused at /host/proc,
// before its link, which names the host's root, is followed: the text a
// link in /proc reads as is not where the kernel goes through it). The
// file system is asked (statfs, a round trip on NFS) only where the
// device changes: a mount point.
func resolvePath(p string) (string, error) {
	const unknown = ^uint64(0)
	resolved, dev := "/", unknown
	rest := strings.Split(p, "/")
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			resolved, dev = filepath.Dir(resolved), unknown
			continue
		}
		next := filepath.Join(resolved, name)
		st, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			// Not there yet (or under a file, where nothing can be):
			// the rest as written.
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxLinks {
				return "", fmt.Errorf("%s: too many levels of symbolic links", p)
			}
			link, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			if filepath.IsAbs(link) {
				resolved, dev = "/", unknown
			}
			rest = append(strings.Split(link, "/"), rest...)
			continue
		}
		if d := fileDev(st); d != dev {
			if kind := kernelFS(next); kind != "" {
				return "", fmt.Errorf("%s is on a %s file system, which holds the kernel's state, never backups", next, kind)
			}
			dev = d
		}
		resolved = next
	}
	return resolved, nil
}

// fileRoots confines the file:// targets this process opens (NewDriver);
// nil, as in a test or a tool that opens a store itself, confines none.
// The daemon sets it once at its start, from --backup-target-file-roots,
// before anything opens a target. It is the process's, not an option of
// each caller, because the roots say what this host's mounts are: every
// opener (the controllers, the engine service, a restore) must obey them,
// and one that is added later cannot forget to.
var fileRoots atomic.Pointer[FileRoots]

// ConfineFileTargets makes NewDriver open file:// targets only inside
// roots (none with empty roots), and check every path their drivers
// touch against a symbolic link planted in the target afterwards.
func ConfineFileTargets(roots *FileRoots) { fileRoots.Store(roots) }

// CheckTarget refuses a backup-target URL that this process would not
// open for where it is: a file:// folder outside the confined roots. Any
// other URL is NewDriver's to check. The API calls it before it writes
// a target, so the caller hears why at once.
func CheckTarget(target string) error {
	roots := fileRoots.Load()
	if roots == nil {
		return nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "file" || !filepath.IsAbs(u.Path) {
		return nil
	}
	_, err = roots.Resolve(u.Path)
	return err
}

// confined refuses a path of a confined FileDriver that resolves out of
// its folder: a symbolic link planted in the target after it was opened
// (by whoever else may write to the share) must not take a write or read
// elsewhere. The check and the use are separate system calls, so a link
// swapped in between them is not caught; it stops a link that is there.
func (d *FileDriver) confined(p string) error {
	if !d.confine {
		return nil
	}
	real, err := resolvePath(p)
	if err != nil {
		return err
	}
	if !within(real, d.Root) {
		return fmt.Errorf("%s resolves to %s, outside the backup target %s: a symbolic link in the target is not followed out of it", p, real, d.Root)
	}
	return nil
}
