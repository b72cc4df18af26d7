package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// BackingFile is a read-only image at the bottom of a replica's chain: the
// file of a backing image on the replica's disk, shared by every replica
// there that starts from the image. Blocks that no layer holds read from
// it; nothing is ever written to it.
type BackingFile struct {
	// Path is the file, <disk>/backing-images/<name>-<uuid>/backing.
	Path string `json:"path"`
	// Name and Checksum identify the backing image; backups record them.
	Name     string `json:"name"`
	Checksum string `json:"checksum"`
	// FileSize is the file's size in bytes when the replica was created. A
	// file of another size at Path is another file, and the replica
	// refuses to open on it rather than show a different disk.
	FileSize int64 `json:"fileSize"`
}

// ErrBackingFile marks a backing file the replica cannot use.
var ErrBackingFile = errors.New("backing file")

// backingReader reads a backing file's content: a raw file as it is, a
// qcow2 file through its tables.
type backingReader interface {
	io.ReaderAt
	io.Closer
	// Size is the content's size: the disk it holds, not the file's.
	Size() int64
}

// qcow2Magic starts every qcow2 file.
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// rawBacking is a raw backing file.
type rawBacking struct {
	*os.File
	size int64
}

func (r rawBacking) Size() int64 { return r.size }

// openBacking opens b's file and checks it is the file the replica was
// created on.
func openBacking(b *BackingFile) (backingReader, error) {
	f, err := os.Open(b.Path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrBackingFile, b.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w %s: %w", ErrBackingFile, b.Path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w %s: not a regular file", ErrBackingFile, b.Path)
	}
	if b.FileSize != 0 && st.Size() != b.FileSize {
		f.Close()
		return nil, fmt.Errorf("%w %s is %d bytes, but the replica was created on a file of %d bytes: not the same file",
			ErrBackingFile, b.Path, st.Size(), b.FileSize)
	}
	head := make([]byte, len(qcow2Magic))
	if _, err := f.ReadAt(head, 0); err != nil && err != io.EOF {
		f.Close()
		return nil, fmt.Errorf("%w %s: %w", ErrBackingFile, b.Path, err)
	}
	if bytes.Equal(head, qcow2Magic) {
		// One reader per qcow2 file in the process (see openQcow2s); it
		// takes f.
		r, err := openQcow2s.open(f)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrBackingFile, b.Path, err)
		}
		return r, nil
	}
	return rawBacking{File: f, size: st.Size()}, nil
}

// readBacking fills p with the backing content at off: zeros past its end,
// or everywhere when there is no backing file.
func readBacking(b backingReader, p []byte, off int64) error {
	n := 0
	if b != nil && off < b.Size() {
		n = int(min(int64(len(p)), b.Size()-off))
		got, err := b.ReadAt(p[:n], off)
		if got < n && (err == nil || err == io.EOF) {
			err = fmt.Errorf("%d of %d bytes: the image is shorter than it says", got, n)
		}
		if got < n {
			return fmt.Errorf("%w: read at %d: %w", ErrBackingFile, off, err)
		}
	}
	clear(p[n:])
	return nil
}

// CreateOnBacking makes a new, empty replica of size bytes in dir whose
// chain starts on a backing file. The backing content must fit in size.
func CreateOnBacking(dir string, size int64, backing BackingFile) (*Replica, error) {
	if backing.Path == "" {
		return nil, fmt.Errorf("%w: no path", ErrBackingFile)
	}
	b, err := openBacking(&backing)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if b.Size() > size {
		return nil, fmt.Errorf("volume size %d is smaller than its backing image %s (%d bytes)", size, backing.Name, b.Size())
	}
	st, err := os.Stat(backing.Path)
	if err != nil {
		return nil, err
	}
	backing.FileSize = st.Size()
	return create(dir, size, &backing)
}

// Backing is the replica's backing file, nil when its chain starts empty.
func (r *Replica) Backing() *BackingFile {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.meta.Backing == nil {
		return nil
	}
	b := *r.meta.Backing
	return &b
}

// BackingFileVirtualSize is the size of the disk a backing file holds:
// the file's size for a raw image, the virtual size in a qcow2 image's
// header. A file a replica could not open on (a qcow2 image with a
// backing file of its own, encrypted, corrupt) is refused with the reason.
func BackingFileVirtualSize(path string) (int64, error) {
	b, err := openBacking(&BackingFile{Path: path})
	if err != nil {
		return 0, err
	}
	defer b.Close()
	return b.Size(), nil
}
