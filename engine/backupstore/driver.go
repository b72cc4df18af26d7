package backupstore

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// Driver stores objects by slash-separated key, and is safe for concurrent
// use: the FileDriver on a filesystem (an NFS share), the S3Driver in a
// bucket.
type Driver interface {
	// Write stores data under key so that a reader sees all of it or none.
	Write(key string, data []byte) error
	// Read returns an object of at most limit bytes; a larger one is
	// refused with an error wrapping ErrInvalid, without reading it.
	Read(key string, limit int64) ([]byte, error)
	Exists(key string) (bool, error)
	// List returns the keys directly under prefix (one level).
	List(prefix string) ([]string, error)
	Delete(key string) error
}

// deepLister is a Driver that lists every key under a prefix, at any
// depth, in one go: an object store, where each one-level List is a
// request of its own.
type deepLister interface {
	ListAll(prefix string) ([]string, error)
}

// ErrNotExist is returned for a key the store does not have.
var ErrNotExist = fs.ErrNotExist

// NewDriver returns the driver of a backup-target URL. cred is the data of
// the backup-target-credential-secret (nil when none is set): s3:// reads
// its AWS_* keys, file:// needs none. A file:// target is opened only
// inside the roots ConfineFileTargets set, if it was called.
func NewDriver(target string, cred map[string]string) (Driver, error) {
	return newDriver(target, cred, fileRoots.Load())
}

// newDriver is NewDriver with roots the file:// targets are confined to
// (nil: unconfined).
func newDriver(target string, cred map[string]string, roots *FileRoots) (Driver, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("backup target %q: %v", target, err)
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("backup target %q: file:// needs an absolute path", target)
		}
		if roots == nil {
			return &FileDriver{Root: u.Path}, nil
		}
		real, err := roots.Resolve(u.Path)
		if err != nil {
			return nil, fmt.Errorf("backup target %q: %w", target, err)
		}
		return &FileDriver{Root: real, confine: true}, nil
	case "s3":
		return NewS3Driver(target, cred)
	case "":
		return nil, errors.New("no backup target is set (the backup-target setting is empty)")
	}
	return nil, fmt.Errorf("backup target %q: the %s:// store is not supported yet; use s3://<bucket>@<region>/<path> or file:///path", target, u.Scheme)
}

// UsesCredential reports whether a backup-target URL reads the
// backup-target-credential-secret (s3:// does; file:// does not).
func UsesCredential(target string) bool {
	return strings.HasPrefix(target, "s3://")
}

// FileDriver keeps objects as files under Root, as on an NFS share.
// Write is durable when it returns; the blocks of a backup are made
// durable together (see fileBatch).
type FileDriver struct {
	Root string
	// Timeout and MinRate bound a read as S3Driver's do: Timeout to open
	// the file, then as long as its size needs at MinRate (bytes per
	// second). Zero means the defaults.
	Timeout time.Duration
	MinRate int64
	// confine, set by NewDriver for a target inside FileRoots (whose
	// Root it resolved), refuses each path that resolves out of Root.
	confine bool

	// onSync, when set (by tests), is called with each file or folder
	// made durable, after it is.
	onSync func(path string)
	// syncHook, when set (by tests), runs before each block file is
	// made durable; an error fails it.
	syncHook func(path string) error
	// noDirect, when set (by tests), writes blocks through the page
	// cache, as where the file system takes no O_DIRECT.
	noDirect bool
	// readHook, when set (by tests), runs before each read opens its
	// file, as a stalled file system would.
	readHook func(path string)
}

// syncFile makes a file's content durable.
func (d *FileDriver) syncFile(f *os.File) error {
	if d.syncHook != nil {
		if err := d.syncHook(f.Name()); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if d.onSync != nil {
		d.onSync(f.Name())
	}
	return nil
}

// syncDir makes a folder's entries durable.
func (d *FileDriver) syncDir(dir string) error {
	if err := atomicfile.SyncDir(dir); err != nil {
		return err
	}
	if d.onSync != nil {
		d.onSync(dir)
	}
	return nil
}

func (d *FileDriver) path(key string) string {
	return filepath.Join(d.Root, filepath.FromSlash(key))
}

// Write replaces the file atomically and durably, with the folders made
// for it.
func (d *FileDriver) Write(key string, data []byte) error {
	p := d.path(key)
	dir := filepath.Dir(p)
	// The file is replaced, not written through: its folder is what
	// must not lead out of the target.
	if err := d.confined(dir); err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// The new folders' entries, up to the root.
		root := filepath.Clean(d.Root)
		for f := filepath.Dir(dir); ; f = filepath.Dir(f) {
			if err := d.syncDir(f); err != nil {
				return err
			}
			if f == root || f == filepath.Dir(f) {
				break
			}
		}
	}
	if err := atomicfile.WriteFile(p, data); err != nil {
		return err
	}
	if d.onSync != nil {
		d.onSync(p)
		d.onSync(dir)
	}
	return nil
}

func (d *FileDriver) Exists(key string) (bool, error) {
	if err := d.confined(d.path(key)); err != nil {
		return false, err
	}
	_, err := os.Stat(d.path(key))
	if errors.Is(err, syscall.ENOTDIR) {
		err = d.underFile(err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (d *FileDriver) List(prefix string) ([]string, error) {
	if err := d.confined(d.path(prefix)); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(d.path(prefix))
	if errors.Is(err, syscall.ENOTDIR) {
		err = d.underFile(err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	dir := strings.Trim(prefix, "/")
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "."):
		case dir == "":
			out = append(out, e.Name())
		default:
			out = append(out, dir+"/"+e.Name())
		}
	}
	return out, nil
}

func (d *FileDriver) Delete(key string) error {
	// Remove takes a link away, not what it names: the folder is checked.
	if err := d.confined(filepath.Dir(d.path(key))); err != nil {
		return err
	}
	err := os.Remove(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
