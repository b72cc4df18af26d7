package backupstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// Everything a target holds is read with a cap by kind: another writer, a
// damaged disk or a symlink to /dev/zero must not run the manager out of
// memory. An object over its cap, or on file:// anything but a regular
// file (a named pipe would block the read for ever), is refused with an
// error wrapping ErrInvalid, so that a scan reports it as an invalid
// record and reads the rest.
const (
	// maxRecordSize caps a volume record (volume.cfg) and a lock.
	maxRecordSize = 1 << 20
	// maxBackupConfigSize caps a backup config: its block list takes
	// about 100 bytes per stored 2 MiB block, so this holds 10 million
	// blocks, 20 TiB of data.
	maxBackupConfigSize = 1 << 30
	// maxBlockFileSize caps a stored block: compression never makes a
	// 2 MiB block much larger than itself.
	maxBlockFileSize = 2 * BlockSize
)

// tooLarge is an object over its read cap.
func tooLarge(key string, size, limit int64) error {
	return fmt.Errorf("%s: %w: it holds %d bytes, more than the %d bytes such an object may hold", key, ErrInvalid, size, limit)
}

// Defaults of FileDriver's read bounds, as S3Driver's.
const (
	defaultFileTimeout = DefaultS3Timeout
	defaultFileMinRate = DefaultS3MinRate
)

// errFileTimeout is a file read the file system did not complete in time.
var errFileTimeout = errors.New("the file system did not answer in time")

// Read returns a regular file's content, at most limit bytes. It gives
// the file system Timeout to open it and then as long as its size needs at
// MinRate; a read still blocked then (a hard NFS mount that lost its
// server) is left behind, and Read fails saying so.
func (d *FileDriver) Read(key string, limit int64) ([]byte, error) {
	timeout, rate := d.Timeout, d.MinRate
	if timeout <= 0 {
		timeout = defaultFileTimeout
	}
	if rate <= 0 {
		rate = defaultFileMinRate
	}
	type result struct {
		data []byte
		err  error
	}
	sized := make(chan int64, 1)
	done := make(chan result, 1)
	go func() {
		if d.readHook != nil {
			d.readHook(d.path(key))
		}
		data, err := d.readRegular(d.path(key), key, limit, sized)
		done <- result{data, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case r := <-done:
			return r.data, r.err
		case n := <-sized:
			timer.Reset(timeout + time.Duration(n)*time.Second/time.Duration(rate))
		case <-timer.C:
			return nil, fmt.Errorf("read %s: %w", key, errFileTimeout)
		}
	}
}

// readRegular reads a regular file of at most limit bytes, and sends its
// size on sized once it knows it. A key under a file, not a folder, does
// not exist, as in an object store.
func (d *FileDriver) readRegular(path, key string, limit int64, sized chan<- int64) ([]byte, error) {
	if err := d.confined(path); err != nil {
		return nil, err
	}
	// O_NONBLOCK: opening a named pipe must not wait for a writer. It
	// changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, d.underFile(err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: not a regular file (%s)", key, ErrInvalid, fileKind(st.Mode()))
	}
	if st.Size() > limit {
		return nil, tooLarge(key, st.Size(), limit)
	}
	sized <- st.Size()
	// The size may change under us: read at most one byte past the cap
	// to tell.
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	n, err := io.Copy(buf, io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, tooLarge(key, n, limit)
	}
	return buf.Bytes(), nil
}

// underFile is what "not a directory" means: a key under a stray file in
// the target (say backupstore/volumes/README/volume.cfg) is a missing key,
// as in an object store; but a target whose root is itself a file cannot
// be read at all.
func (d *FileDriver) underFile(err error) error {
	if st, serr := os.Stat(d.Root); serr == nil && !st.IsDir() {
		return fmt.Errorf("the backup target %s is not a folder", d.Root)
	}
	return fmt.Errorf("%w (%v)", ErrNotExist, err)
}

// fileKind names a file type that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
