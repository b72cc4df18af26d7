package backupstore

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// A blockBatch stores the blocks of one backup. write hands a block over
// and returns at once (the data is copied); goroutines of the batch store
// it, so that the backup's workers (checksum and compression, as many as
// the backup's concurrency) never wait for the target. commit returns
// once every block written is in the target and durable; the backup
// config that names them is written only after it.
type blockBatch interface {
	// claim reports whether key is new to the batch: of the workers that
	// meet the same block in one backup, one stores it.
	claim(key string) bool
	write(key string, data []byte) error
	// reused tells of a block found in the target and not written: the
	// backup relies on it as on the blocks it writes.
	reused(key string)
	commit() error
	// abort ends a batch that will not be committed.
	abort()
}

// batcher is a Driver with a batch of its own (FileDriver).
type batcher interface {
	newBatch(volume string, writers int) (blockBatch, error)
}

// newBlockBatch returns the driver's batch, or one writing each block with
// Driver.Write (whole and durable when it returns: an S3 PUT) on writers
// goroutines.
func newBlockBatch(d Driver, volume string, writers int) (blockBatch, error) {
	if b, ok := d.(batcher); ok {
		return b.newBatch(volume, writers)
	}
	return newAsyncBatch(writers, d.Write), nil
}

// batchWriters is how many blocks a backup with workers workers has in
// flight to the target: more than it compresses at once, so that the
// round trips of uploads (or the disk's latency) overlap.
func batchWriters(workers int) int { return max(4, 2*workers) }

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

// asyncBatch stores the blocks handed to it with store, on goroutines of
// its own; the first error fails the batch.
type asyncBatch struct {
	claims
	store func(key string, data []byte) error

	queue     chan queuedBlock
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu  sync.Mutex
	err error
}

// queuedBlock is a block to store: the first n bytes of a buffer from
// alignedBuffer.
type queuedBlock struct {
	key string
	buf *[]byte
	n   int
}

func newAsyncBatch(writers int, store func(key string, data []byte) error) *asyncBatch {
	b := &asyncBatch{claims: claims{seen: map[string]bool{}}, store: store, queue: make(chan queuedBlock, writers)}
	for i := 0; i < writers; i++ {
		b.wg.Add(1)
		go b.writer()
	}
	return b
}

// write copies the block (the caller reuses data) for a writer to store.
func (b *asyncBatch) write(key string, data []byte) error {
	if err := b.failed(); err != nil {
		return err
	}
	buf := alignedBuffer(len(data))
	copy(*buf, data)
	b.queue <- queuedBlock{key: key, buf: buf, n: len(data)}
	return nil
}

func (b *asyncBatch) writer() {
	defer b.wg.Done()
	for q := range b.queue {
		if b.failed() == nil {
			if err := b.storeOne(q); err != nil {
				b.fail(fmt.Errorf("upload block %s: %w", path.Base(q.key), err))
			}
		}
		putBlockBuffer(q.buf)
	}
}

// storeOne stores a block. A panic in it (a driver's, say) is the
// backup's error: the writers run outside any caller that could recover
// it.
func (b *asyncBatch) storeOne(q queuedBlock) (err error) {
	defer panics.Recover(logrus.WithField("block", q.key), &err)
	return b.store(q.key, (*q.buf)[:q.n])
}

func (b *asyncBatch) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

func (b *asyncBatch) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// drain waits for the blocks handed over and returns the batch's error.
func (b *asyncBatch) drain() error {
	b.closeOnce.Do(func() { close(b.queue) })
	b.wg.Wait()
	return b.failed()
}

func (b *asyncBatch) commit() error { return b.drain() }
func (b *asyncBatch) abort()        { _ = b.drain() }
func (b *asyncBatch) reused(string) {}

// stagingKey is the folder of a volume's blocks that a file:// backup has
// written and not yet made durable. Only a backup writes there; a
// deletion, which runs only while no backup of the volume does (lock.go),
// removes what crashed backups left.
func stagingKey(volume string) string { return volumeKey(volume) + "/.staging" }

// fileBatch writes each block to a file of its own in the staging
// folder, makes it durable and only then renames it to its key, on the
// goroutines of an asyncBatch: a block present in the target was durable
// before it appeared, and the backup's workers never wait for the disk.
// commit waits for them, then fsyncs the folders the renames changed.
//
// Blocks are written with O_DIRECT where the file system takes it: the
// block goes from the buffer to the device, where it must go anyway
// before the backup completes, without a copy into the page cache and
// its writeback.
type fileBatch struct {
	*asyncBatch
	d       *FileDriver
	staging string
	seq     atomic.Int64
	direct  atomic.Bool // O_DIRECT works here, as far as known

	dirsMu sync.Mutex
	dirs   map[string]bool // folders whose entries must be made durable
}

func (d *FileDriver) removeStaging(volume string) error {
	// RemoveAll does not follow links inside; the folder above is checked.
	staging := d.path(stagingKey(volume))
	if err := d.confined(filepath.Dir(staging)); err != nil {
		return err
	}
	return os.RemoveAll(staging)
}

func (d *FileDriver) newBatch(volume string, writers int) (blockBatch, error) {
	parent := d.path(stagingKey(volume))
	if err := d.confined(parent); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(parent, "backup-")
	if err != nil {
		return nil, err
	}
	b := &fileBatch{d: d, staging: staging, dirs: map[string]bool{}}
	b.direct.Store(oDirect != 0 && !d.noDirect)
	b.asyncBatch = newAsyncBatch(writers, b.store)
	return b, nil
}

// store writes a block to a staged file, makes it durable and puts it at
// its key. data's buffer has room to pad it for O_DIRECT.
func (b *fileBatch) store(key string, data []byte) error {
	name := filepath.Join(b.staging, strconv.FormatInt(b.seq.Add(1), 10))
	err := errNoDirect
	if b.direct.Load() {
		err = b.writeFile(name, oDirect, data[:alignUp(len(data))], len(data))
		if errors.Is(err, syscall.EINVAL) {
			// The file system takes no O_DIRECT (tmpfs, say), or not
			// with this alignment: through the page cache then.
			b.direct.Store(false)
			os.Remove(name)
			err = errNoDirect
		}
	}
	if err == errNoDirect {
		err = b.writeFile(name, 0, data, len(data))
	}
	if err == nil {
		err = b.place(name, b.d.path(key))
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
	if err := b.d.confined(filepath.Dir(name)); err != nil {
		return err
	}
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
// whose entries must be made durable.
func (b *fileBatch) place(staged, final string) error {
	dir := filepath.Dir(final)
	if err := b.d.confined(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Rename(staged, final); err != nil {
		return err
	}
	b.syncBefore(final)
	return nil
}

// reused notes the folders of a block found at its key: another backup
// running beside this one may have put it there and not yet synced its
// folders, and this backup's config must not be durable before they are.
func (b *fileBatch) reused(key string) { b.syncBefore(b.d.path(key)) }

// syncBefore notes that commit must make durable the entries of file's
// folder and of every folder above it up to the root (one may have been
// made for it, here or by another backup that has not synced it yet).
func (b *fileBatch) syncBefore(file string) {
	b.dirsMu.Lock()
	defer b.dirsMu.Unlock()
	for d := filepath.Dir(file); !b.dirs[d]; d = filepath.Dir(d) {
		b.dirs[d] = true
		if d == filepath.Clean(b.d.Root) || d == filepath.Dir(d) {
			break
		}
	}
}

// directAlign is the alignment of O_DIRECT buffers and lengths.
const directAlign = 4096

func alignUp(n int) int { return (n + directAlign - 1) &^ (directAlign - 1) }

// blockBuffers hold blocks on their way to the target, kept from backup
// to backup (not a sync.Pool, which each garbage collection empties: at
// 2 MiB each, making them again cost a backup more in page faults and
// clearing than the copies they hold).
var blockBuffers = make(chan *[]byte, 64)

func putBlockBuffer(p *[]byte) {
	select {
	case blockBuffers <- p:
	default:
	}
}

// alignedBuffer returns a buffer of n bytes at an aligned address, with
// room to pad them to alignUp(n).
func alignedBuffer(n int) *[]byte {
	select {
	case p := <-blockBuffers:
		if cap(*p) >= alignUp(n) {
			*p = (*p)[:n]
			return p
		}
	default:
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

// commit returns once every block written is durable at its key, its
// folder entries included.
func (b *fileBatch) commit() error {
	defer os.RemoveAll(b.staging)
	if err := b.drain(); err != nil {
		return err
	}
	const syncers = 4
	dirs := make(chan string)
	errs := make(chan error, syncers)
	for i := 0; i < syncers; i++ {
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
	for i := 0; i < syncers; i++ {
		err = errors.Join(err, <-errs)
	}
	return err
}

// abort waits for the syncers and removes what is still staged. Blocks
// already in place stay: they are whole, and a deletion collects them
// unless a backup uses them.
func (b *fileBatch) abort() {
	_ = b.drain()
	os.RemoveAll(b.staging)
}
