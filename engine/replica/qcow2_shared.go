package replica

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Replicas on one disk share their backing file, and a node may hold
// dozens of replicas on one image (VMs started from it). A qcow2 reader
// holds the L1 table and up to a few MiB of cached L2 tables and inflated
// clusters, so the process keeps one reader per qcow2 file, whoever opens
// it: replicas and snapshot views take a handle on it, and the last handle
// closed closes it. Raw backing files keep no cache and are not shared.
var openQcow2s = qcow2Registry{readers: map[qcow2FileID]*sharedQcow2{}}

// qcow2FileID tells one file's content from another's: the same inode,
// neither resized nor rewritten since it was opened (a file replaced
// under the same path is a new inode).
type qcow2FileID struct {
	dev, ino      uint64
	size, mtimeNs int64
}

type qcow2Registry struct {
	mu      sync.Mutex
	readers map[qcow2FileID]*sharedQcow2
}

// sharedQcow2 is a reader and the number of open handles on it.
type sharedQcow2 struct {
	*qcow2Reader
	id   qcow2FileID
	refs int
}

// qcow2Handle is one opener's use of a shared reader; Close releases it,
// once however often it is called.
type qcow2Handle struct {
	*sharedQcow2
	reg  *qcow2Registry
	once sync.Once
}

func (h *qcow2Handle) Close() error {
	var err error
	h.once.Do(func() { err = h.reg.release(h.sharedQcow2) })
	return err
}

func fileIDOf(st os.FileInfo) (qcow2FileID, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return qcow2FileID{}, false
	}
	return qcow2FileID{dev: uint64(sys.Dev), ino: sys.Ino, size: st.Size(), mtimeNs: st.ModTime().UnixNano()}, true
}

// open returns a handle on the reader of the qcow2 file f, taking f
// (closed when another opener's reader serves, or else owned by the new
// reader).
func (g *qcow2Registry) open(f *os.File) (backingReader, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	id, ok := fileIDOf(st)
	if !ok {
		// No inode to share by: a reader of its own.
		r, err := openQcow2(f)
		if err != nil {
			f.Close()
		}
		return r, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.readers[id]; s != nil {
		f.Close()
		s.refs++
		return &qcow2Handle{sharedQcow2: s, reg: g}, nil
	}
	r, err := newQcow2Reader(f, st.Size(), f)
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &sharedQcow2{qcow2Reader: r, id: id, refs: 1}
	g.readers[id] = s
	return &qcow2Handle{sharedQcow2: s, reg: g}, nil
}

func (g *qcow2Registry) release(s *sharedQcow2) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	s.refs--
	switch {
	case s.refs > 0:
		return nil
	case s.refs < 0:
		return fmt.Errorf("qcow2 reader of inode %d released more often than opened", s.id.ino)
	}
	delete(g.readers, s.id)
	return s.qcow2Reader.Close()
}
