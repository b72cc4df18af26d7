package replica

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// The qcow2 reader's caches: L2 tables and inflated compressed clusters,
// each about this many bytes (at least two clusters), per reader: one per
// qcow2 file in the process (see openQcow2s).
const (
	qcow2L2CacheBytes         = 1 << 20
	qcow2CompressedCacheBytes = 2 << 20
)

// qcow2Reader reads the virtual disk of a qcow2 file, version 2 or 3,
// without a backing file of its own: unallocated and zero clusters read as
// zeros, compressed clusters are inflated (raw deflate). It is safe for
// concurrent ReadAt: the file is read with pread and the caches lock.
type qcow2Reader struct {
	f        io.ReaderAt
	closer   io.Closer
	fileSize int64
	h        *qcow2Header
	// l1 is the L1 table, as far as the virtual size reaches.
	l1 []uint64

	l2Cache         *clusterCache
	compressedCache *clusterCache
	inflaters       sync.Pool // of io.ReadCloser that are flate.Resetter
}

// openQcow2 reads a qcow2 backing file's header and L1 table and checks
// them. The reader owns f once it is returned.
func openQcow2(f *os.File) (backingReader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	q, err := newQcow2Reader(f, st.Size(), f)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// newQcow2Reader reads the qcow2 image in the fileSize bytes of f;
// closer, if any, is closed with the reader.
func newQcow2Reader(f io.ReaderAt, fileSize int64, closer io.Closer) (*qcow2Reader, error) {
	buf := make([]byte, min(qcow2MaxHeaderRead, fileSize))
	if _, err := f.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("qcow2: read the header: %w", err)
	}
	h, err := parseQcow2Header(buf, fileSize)
	if err != nil {
		return nil, err
	}
	q := &qcow2Reader{f: f, closer: closer, fileSize: fileSize, h: h}
	if q.h.backingNameLen > 0 {
		name := make([]byte, q.h.backingNameLen)
		if _, err := f.ReadAt(name, q.h.backingNameOffset); err != nil {
			return nil, fmt.Errorf("qcow2: read the backing file name: %w", err)
		}
		return nil, fmt.Errorf("%w: the image has a backing file of its own (%q); make it standalone with qemu-img convert first", ErrQcow2Unsupported, name)
	}
	if err := q.readL1(); err != nil {
		return nil, err
	}
	cs := q.h.clusterSize()
	q.l2Cache = newClusterCache(qcow2L2CacheBytes, cs)
	q.compressedCache = newClusterCache(qcow2CompressedCacheBytes, cs)
	return q, nil
}

// readL1 reads the L1 entries the virtual size needs and checks them.
func (q *qcow2Reader) readL1() error {
	raw := make([]byte, q.h.l1Entries*8)
	if _, err := q.f.ReadAt(raw, q.h.l1Offset); err != nil {
		return fmt.Errorf("qcow2: read the L1 table: %w", err)
	}
	q.l1 = make([]uint64, q.h.l1Entries)
	for i := range q.l1 {
		q.l1[i] = binary.BigEndian.Uint64(raw[i*8:])
	}
	return q.checkL1()
}

// Size is the virtual disk's size.
func (q *qcow2Reader) Size() int64 { return q.h.size }

// Close closes the file.
func (q *qcow2Reader) Close() error {
	if q.closer == nil {
		return nil
	}
	return q.closer.Close()
}

// ReadAt reads the virtual disk at off, across as many clusters as p
// spans. Clusters that follow each other in the file are read at once.
func (q *qcow2Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("qcow2: read at negative offset %d", off)
	}
	if off >= q.h.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), q.h.size-off))
	cs, mask := q.h.clusterSize(), q.h.clusterSize()-1
	// run is a pending read of n bytes of consecutive data clusters at
	// host in the file into p[at:].
	var run struct{ host, at, n int64 }
	flush := func() error {
		if run.n == 0 {
			return nil
		}
		err := q.readData(p[run.at:run.at+run.n], run.host)
		run.n = 0
		return err
	}
	for done := int64(0); done < int64(n); {
		pos := off + done
		within := pos & mask
		chunk := min(cs-within, int64(n)-done)
		m, err := q.mapCluster(pos >> q.h.clusterBits)
		if err != nil {
			return 0, err
		}
		switch m.kind {
		case clusterZero:
			clear(p[done : done+chunk])
		case clusterData:
			host := m.host + within
			if run.n > 0 && run.host+run.n == host && run.at+run.n == done {
				run.n += chunk
				break
			}
			if err := flush(); err != nil {
				return 0, err
			}
			run.host, run.at, run.n = host, done, chunk
		case clusterCompressed:
			c, err := q.inflated(m)
			if err != nil {
				return 0, err
			}
			copy(p[done:done+chunk], c[within:])
		}
		done += chunk
	}
	if err := flush(); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readData reads data clusters' bytes at host. A last cluster that the
// file does not hold in full reads as zeros past the file's end, as in
// qemu.
func (q *qcow2Reader) readData(p []byte, host int64) error {
	n, err := q.f.ReadAt(p, host)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("qcow2: read data at %d: %w", host, err)
	}
	clear(p[n:])
	return nil
}

// inflated returns the cluster that the compressed data of m inflates
// to, from the cache or the file.
func (q *qcow2Reader) inflated(m clusterMapping) ([]byte, error) {
	if c, ok := q.compressedCache.get(m.host); ok {
		return c, nil
	}
	compressed := make([]byte, m.length)
	if _, err := q.f.ReadAt(compressed, m.host); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("qcow2: read compressed data at %d: %w", m.host, err)
	}
	out := make([]byte, q.h.clusterSize())
	src := bytes.NewReader(compressed)
	inflater, _ := q.inflaters.Get().(io.ReadCloser)
	if inflater == nil {
		inflater = flate.NewReader(src)
	} else if err := inflater.(flate.Resetter).Reset(src, nil); err != nil {
		return nil, err
	}
	// qemu writes the cluster whole; data that inflates to less is
	// corrupt, and what follows a full cluster is ignored, as in qemu.
	_, err := io.ReadFull(inflater, out)
	q.inflaters.Put(inflater)
	if err != nil {
		return nil, fmt.Errorf("%w: compressed data at %d (%d bytes) does not inflate to a cluster: %v", ErrQcow2Corrupt, m.host, m.length, err)
	}
	q.compressedCache.add(m.host, out)
	return out, nil
}
