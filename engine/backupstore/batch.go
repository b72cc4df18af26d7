package backupstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// A blockBatch stores the blocks of one backup. A block is at its key only
// once it is whole and durable, as before the batch existed: a later
// backup trusts a block it finds and reuses it. commit returns once every
// block written is in place and durable; the backup config that names them
// is written only after it.
type blockBatch interface {
	// claim reports whether key is new to the batch: of the workers that
	// meet the same block in one backup, one stores it.
	claim(key string) bool
	write(key string, data []byte) error
	commit() error
	// abort ends a batch that will not be committed.
	abort()
}

// batcher is a Driver that makes the writes of a batch durable together
// rather than one by one.
type batcher interface {
	newBatch(volume string) (blockBatch, error)
}

// newBlockBatch returns the driver's batch, or one writing each block
// through Driver.Write (durable when Write returns) for other drivers.
func newBlockBatch(d Driver, volume string) (blockBatch, error) {
	if b, ok := d.(batcher); ok {
		return b.newBatch(volume)
	}
	return &directBatch{d: d, claims: claims{seen: map[string]bool{}}}, nil
}

type claims struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (c *claims) claim(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[key] {
		return false
	}
	c.seen[key] = true
	return true
}

// directBatch writes each block as it comes (an object store's PUT is
// whole and durable when it returns).
type directBatch struct {
	d Driver
	claims
}

func (b *directBatch) write(key string, data []byte) error { return b.d.Write(key, data) }
func (b *directBatch) commit() error                       { return nil }
func (b *directBatch) abort()                              {}

// stagingKey is the folder of a volume's blocks that a file:// backup has
// written and not yet made durable. Only a backup writes there; a
// deletion, which runs only while no backup of the volume does (lock.go),
// removes what crashed backups left.
func stagingKey(volume string) string { return volumeKey(volume) + "/.staging" }

// fileSyncers is how many blocks a file:// batch makes durable at once:
// several fsyncs in flight share the file system's journal commits.
const fileSyncers = 4

// fileBatch hands each block to syncers, which write it to a file of its
// own in the staging folder, make it durable and only then rename it to
// its key: a block present in the target was durable before it appeared,
// and the backup's workers never wait for the disk. commit waits for the
// syncers, then fsyncs the folders the renames changed.
//
// The syncers write with O_DIRECT where the file system takes it: the
// block goes from the buffer to the device, where it must go anyway
// before the backup completes, without a copy into the page cache and
// its writeback.
type fileBatch struct {
	d       *FileDriver
	staging string
	seq     atomic.Int64
	direct  atomic.Bool // O_DIRECT works here, as far as known
	claims

	queue     chan stagedBlock
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu   sync.Mutex // guards err and dirs
	err  error
	dirs map[string]bool // folders whose entries must be made durable
}

// stagedBlock is a block to store: the first n bytes of an aligned buffer.
type stagedBlock struct {
	buf   *[]byte
	n     int
	final string
}

func (d *FileDriver) removeStaging(volume string) error {
	return os.RemoveAll(d.path(stagingKey(volume)))
}

func (d *FileDriver) newBatch(volume string) (blockBatch, error) {
	parent := d.path(stagingKey(volume))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(parent, "backup-")
	if err != nil {
		return nil, err
	}
	b := &fileBatch{d: d, staging: staging, claims: claims{seen: map[string]bool{}},
		queue: make(chan stagedBlock, 2*fileSyncers), dirs: map[string]bool{}}
	b.direct.Store(oDirect != 0 && !d.noDirect)
	for i := 0; i < fileSyncers; i++ {
		b.wg.Add(1)
		go b.syncer()
	}
	return b, nil
}

// write copies the block (the caller reuses data) for a syncer to store.
func (b *fileBatch) write(key string, data []byte) error {
	if err := b.failed(); err != nil {
		return err
	}
	buf := alignedBuffer(len(data))
	copy(*buf, data)
	b.queue <- stagedBlock{buf: buf, n: len(data), final: b.d.path(key)}
	return nil
}

func (b *fileBatch) syncer() {
	defer b.wg.Done()
	for s := range b.queue {
		err := b.failed()
		if err == nil {
			err = b.store(s)
			if err != nil {
				b.fail(fmt.Errorf("store block %s: %w", filepath.Base(s.final), err))
			}
		}
		directBuffers.Put(s.buf)
	}
}

// store writes a block to a staged file, makes it durable and puts it at
// its key.
func (b *fileBatch) store(s stagedBlock) error {
	name := filepath.Join(b.staging, strconv.FormatInt(b.seq.Add(1), 10))
	err := errNoDirect
	if b.direct.Load() {
		err = b.writeFile(name, oDirect, (*s.buf)[:alignUp(s.n)], s.n)
		if errors.Is(err, syscall.EINVAL) {
			// The file system takes no O_DIRECT (tmpfs, say), or not
			// with this alignment: through the page cache then.
			b.direct.Store(false)
			os.Remove(name)
			err = errNoDirect
		}
	}
	if err == errNoDirect {
		err = b.writeFile(name, 0, (*s.buf)[:s.n], s.n)
	}
	if err == nil {
		err = b.place(name, s.final)
	}
	if err != nil {
		os.Remove(name)
	}
	return err
}

var errNoDirect = errors.New("no O_DIRECT")

// writeFile writes data to a new file, cuts it to size bytes (data is
// padded to the alignment O_DIRECT needs) and makes it durable.
func (b *fileBatch) writeFile(name string, flags int, data []byte, size int) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|flags, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && len(data) != size {
		err = f.Truncate(int64(size))
	}
	if err == nil {
		err = b.d.syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// place renames a durable staged file to its key, noting the folders
// whose entries must be made durable: its own and every folder above it
// up to the root (one may have been made for it, here or by another
// backup that has not synced it yet).
func (b *fileBatch) place(staged, final string) error {
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Rename(staged, final); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for d := dir; !b.dirs[d]; d = filepath.Dir(d) {
		b.dirs[d] = true
		if d == filepath.Clean(b.d.Root) || d == filepath.Dir(d) {
			break
		}
	}
	return nil
}

// directAlign is the alignment of O_DIRECT buffers and lengths.
const directAlign = 4096

func alignUp(n int) int { return (n + directAlign - 1) &^ (directAlign - 1) }

// directBuffers hold blocks on their way to a syncer.
var directBuffers sync.Pool

// alignedBuffer returns a buffer of n bytes at an aligned address, with
// room to pad them to alignUp(n).
func alignedBuffer(n int) *[]byte {
	if p, ok := directBuffers.Get().(*[]byte); ok && cap(*p) >= alignUp(n) {
		*p = (*p)[:n]
		return p
	}
	size := alignUp(max(n, BlockSize+64<<10))
	raw := make([]byte, size+directAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&raw[0])) & (directAlign - 1)); r != 0 {
		off = directAlign - r
	}
	buf := raw[off : off+n : off+size]
	return &buf
}

func (b *fileBatch) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

func (b *fileBatch) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *fileBatch) drain() {
	b.closeOnce.Do(func() { close(b.queue) })
	b.wg.Wait()
}

// commit returns once every block written is durable at its key, its
// folder entries included.
func (b *fileBatch) commit() error {
	b.drain()
	defer os.RemoveAll(b.staging)
	if err := b.failed(); err != nil {
		return err
	}
	dirs := make(chan string)
	errs := make(chan error, fileSyncers)
	for i := 0; i < fileSyncers; i++ {
		go func() {
			var first error
			for dir := range dirs {
				if err := b.d.syncDir(dir); err != nil && first == nil {
					first = fmt.Errorf("sync folder %s: %w", dir, err)
				}
			}
			errs <- first
		}()
	}
	for dir := range b.dirs {
		dirs <- dir
	}
	close(dirs)
	var err error
	for i := 0; i < fileSyncers; i++ {
		err = errors.Join(err, <-errs)
	}
	return err
}

// abort waits for the syncers and removes what is still staged. Blocks
// already in place stay: they are whole, and a deletion collects them
// unless a backup uses them.
func (b *fileBatch) abort() {
	b.drain()
	os.RemoveAll(b.staging)
}
