package backingimage

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// holeBlock is the granularity at which runs of zeros are left as holes:
// raw images are mostly empty, and a hole costs no disk space.
const holeBlock = 64 << 10

var zeroBlock = make([]byte, holeBlock)

// ErrChecksumMismatch is returned when a complete file does not hash to
// the expected SHA512.
var ErrChecksumMismatch = errors.New("checksum mismatch")

// ErrSizeMismatch is returned when a file's length is not the one announced.
var ErrSizeMismatch = errors.New("size mismatch")

// PartFile is a file being written: a temporary file in the folder of its
// final path, hashed (SHA512) as it is written, with aligned zero blocks
// left as holes. Commit makes it the final file; until then nothing at the
// final path changes.
type PartFile struct {
	f       *os.File
	final   string
	written int64

	// SHA512 is the slowest step (about 320 MB/s on one core), so it runs
	// in its own goroutine, fed copies of what is written, and overlaps
	// with the reads and writes.
	hash     hash.Hash
	toHash   chan []byte
	hashDone chan struct{}
	stop     sync.Once
}

var hashBuffers = sync.Pool{New: func() any { return make([]byte, 0, 1<<20) }}

// CreatePart starts a file that Commit will rename to final, creating
// final's folder when missing.
func CreatePart(final string) (*PartFile, error) {
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(final)+".part-*")
	if err != nil {
		return nil, err
	}
	p := &PartFile{f: f, final: final, hash: sha512.New(), toHash: make(chan []byte, 8), hashDone: make(chan struct{})}
	go func() {
		defer close(p.hashDone)
		for b := range p.toHash {
			p.hash.Write(b)
			if cap(b) == 1<<20 {
				hashBuffers.Put(b[:0])
			}
		}
	}()
	return p, nil
}

// hashLater hands a copy of b to the hashing goroutine.
func (p *PartFile) hashLater(b []byte) {
	for len(b) > 0 {
		buf := hashBuffers.Get().([]byte)
		n := min(len(b), cap(buf))
		buf = append(buf[:0], b[:n]...)
		p.toHash <- buf
		b = b[n:]
	}
}

// finishHash waits for the hashing goroutine; no Write may follow.
func (p *PartFile) finishHash() {
	p.stop.Do(func() { close(p.toHash) })
	<-p.hashDone
}

// Write appends b.
func (p *PartFile) Write(b []byte) (int, error) {
	p.hashLater(b)
	n := 0
	for n < len(b) {
		// Cut at the next holeBlock boundary of the file offset.
		off := p.written
		piece := b[n:]
		if room := holeBlock - int(off%holeBlock); len(piece) > room {
			piece = piece[:room]
		}
		if !(len(piece) == holeBlock && bytes.Equal(piece, zeroBlock)) {
			if _, err := p.f.WriteAt(piece, off); err != nil {
				return n, err
			}
		}
		p.written += int64(len(piece))
		n += len(piece)
	}
	return n, nil
}

// Written is how many bytes were written so far.
func (p *PartFile) Written() int64 { return p.written }

// Checksum is the SHA512 (lower-case hex) of what was written; it ends
// the writing.
func (p *PartFile) Checksum() string {
	p.finishHash()
	return hex.EncodeToString(p.hash.Sum(nil))
}

// Commit checks the size (when size >= 0) and the checksum (when
// expectedChecksum is not empty), syncs the file, renames it to its final
// path and syncs the folder. On any failure the temporary file is removed
// and the final path is untouched. It returns the file's checksum.
func (p *PartFile) Commit(size int64, expectedChecksum string) (string, error) {
	return p.CommitWith(size, expectedChecksum, nil)
}

// CommitWith is Commit, calling before (when not nil) with the verified
// checksum just before the rename: the place to record what the file is,
// so that the file's appearance is the last step.
func (p *PartFile) CommitWith(size int64, expectedChecksum string, before func(sum string) error) (string, error) {
	sum := p.Checksum()
	err := func() error {
		if size >= 0 && p.written != size {
			return fmt.Errorf("%w: got %d bytes, want %d", ErrSizeMismatch, p.written, size)
		}
		if expectedChecksum != "" && sum != expectedChecksum {
			return fmt.Errorf("%w: the file hashes to %s, want %s", ErrChecksumMismatch, sum, expectedChecksum)
		}
		// Trailing holes: set the length WriteAt did not reach.
		if err := p.f.Truncate(p.written); err != nil {
			return err
		}
		if err := p.f.Sync(); err != nil {
			return err
		}
		if err := p.f.Close(); err != nil {
			return err
		}
		if before != nil {
			if err := before(sum); err != nil {
				return err
			}
		}
		if err := os.Rename(p.f.Name(), p.final); err != nil {
			return err
		}
		return atomicfile.SyncDir(filepath.Dir(p.final))
	}()
	if err != nil {
		p.Abort()
		return "", err
	}
	return sum, nil
}

// Abort removes the temporary file. It is safe after Commit.
func (p *PartFile) Abort() {
	p.finishHash()
	p.f.Close()
	os.Remove(p.f.Name())
}

// HashFile returns the SHA512 and size of the file at path; progress, when
// not nil, is called with the bytes read so far. It stops when ctx ends.
func HashFile(ctx context.Context, path string, progress func(done int64)) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha512.New()
	buf := make([]byte, 1<<20)
	var done int64
	for {
		if err := ctx.Err(); err != nil {
			return "", done, err
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		done += int64(n)
		if progress != nil && n > 0 {
			progress(done)
		}
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), done, nil
		}
		if err != nil {
			return "", done, err
		}
	}
}

// Percent is done out of total as a whole percent, 0 to 100; 0 when the
// total is unknown.
func Percent(done, total int64) int {
	if total <= 0 {
		return 0
	}
	p := int(done * 100 / total)
	return min(max(p, 0), 100)
}

// CommitFile makes the complete file at tmp the file at final: it hashes
// tmp (checking it against expectedChecksum when that is not empty),
// syncs it, renames it and syncs final's folder. tmp is left in place
// when the checksum does not match, for the caller to remove.
func CommitFile(ctx context.Context, tmp, final, expectedChecksum string, progress func(done int64)) (string, int64, error) {
	return CommitFileWith(ctx, tmp, final, expectedChecksum, progress, nil)
}

// CommitFileWith is CommitFile, calling before as PartFile.CommitWith does.
func CommitFileWith(ctx context.Context, tmp, final, expectedChecksum string, progress func(done int64), before func(sum string, size int64) error) (string, int64, error) {
	sum, size, err := HashFile(ctx, tmp, progress)
	if err != nil {
		return "", 0, err
	}
	if expectedChecksum != "" && sum != expectedChecksum {
		return "", 0, fmt.Errorf("%w: the file hashes to %s, want %s", ErrChecksumMismatch, sum, expectedChecksum)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return "", 0, err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", 0, err
	}
	if before != nil {
		if err := before(sum, size); err != nil {
			return "", 0, err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", 0, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(final)); err != nil {
		return "", 0, err
	}
	return sum, size, nil
}
