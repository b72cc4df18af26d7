package backupstore

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// Compression methods of backup blocks, as Longhorn's
// backup-compression-method setting names them. A backup records its
// method; a block's file name says how it is stored, so backups with
// different methods never read each other's blocks wrongly:
//
//	gzip  <sha256>.blk       (what every backup used before the setting)
//	lz4   <sha256>.lz4.blk
//	none  <sha256>.raw.blk
const (
	CompressionGzip = "gzip"
	CompressionLZ4  = "lz4"
	CompressionNone = "none"
	// DefaultCompression is Longhorn's default.
	DefaultCompression = CompressionLZ4
)

// blockSuffix is the end of a block's file name in a method.
func blockSuffix(method string) string {
	switch method {
	case CompressionLZ4:
		return ".lz4.blk"
	case CompressionNone:
		return ".raw.blk"
	}
	return ".blk"
}

func blockKey(volume, sum, method string) string {
	return volumeKey(volume) + "/blocks/" + sum[:2] + "/" + sum[2:4] + "/" + sum + blockSuffix(method)
}

// checksumOfBlockFile reads the checksum and method off a block file name;
// ok is false for a name this store does not write.
func checksumOfBlockFile(name string) (sum, method string, ok bool) {
	for _, m := range []string{CompressionLZ4, CompressionNone, CompressionGzip} {
		suffix := blockSuffix(m)
		if s, found := bytes.CutSuffix([]byte(name), []byte(suffix)); found && checksumPattern.Match(s) {
			return string(s), m, true
		}
	}
	return "", "", false
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// lz4Writers leave out the frame's xxh32 of the content: a block's name
// is the SHA-256 of its data, which every restore checks, so the xxh32
// cost a backup and a restore about a sixth of their processor time and
// caught nothing the SHA-256 does not. Blocks written with it still read.
var lz4Writers = sync.Pool{New: func() any {
	w := lz4.NewWriter(nil)
	// An error would only leave the checksum on, slower and as correct;
	// TestLZ4BlocksCarryNoContentChecksum catches it.
	_ = w.Apply(lz4.ChecksumOption(false))
	return w
}}

// compress encodes a block in a method, into z (reset first, and reused
// by the caller from block to block: a fresh 2 MiB buffer per block cost
// a backup a third of its time in allocation). The result is valid until
// z is next used.
func compress(method string, data []byte, z *bytes.Buffer) ([]byte, error) {
	var writers *sync.Pool
	switch method {
	case CompressionNone:
		return data, nil
	case CompressionGzip:
		writers = &gzipWriters
	case CompressionLZ4:
		writers = &lz4Writers
	default:
		return nil, fmt.Errorf("backup compression %q: must be lz4, gzip or none", method)
	}
	w := writers.Get().(blockWriter)
	defer writers.Put(w)
	z.Reset()
	w.Reset(z)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// blockWriter is a compressor that is reused block after block.
type blockWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// decompress decodes a stored block, reading at most limit+1 bytes of it
// so that a block that expands past its place is caught, not held.
func decompress(method string, z []byte, limit int64) ([]byte, error) {
	var d blockDecoder
	return d.decode(method, z, limit)
}

// blockDecoder decodes stored blocks one after another, reusing its
// decoders and its output buffer: what decode returns is valid until the
// next call. It is not safe for concurrent use.
type blockDecoder struct {
	src bytes.Reader
	lz4 *lz4.Reader
	gz  *gzip.Reader
	buf []byte
}

// decode is decompress into the decoder's buffer.
func (d *blockDecoder) decode(method string, z []byte, limit int64) ([]byte, error) {
	d.src.Reset(z)
	var r io.Reader
	switch method {
	case CompressionNone:
		r = &d.src
	case CompressionGzip:
		if d.gz == nil {
			g, err := gzip.NewReader(&d.src)
			if err != nil {
				return nil, err
			}
			d.gz = g
		} else if err := d.gz.Reset(&d.src); err != nil {
			return nil, err
		}
		r = d.gz
	case CompressionLZ4:
		if d.lz4 == nil {
			d.lz4 = lz4.NewReader(&d.src)
		} else {
			d.lz4.Reset(&d.src)
		}
		r = d.lz4
	default:
		return nil, fmt.Errorf("compression %q is not known", method)
	}
	if limit < 0 {
		// No place for any byte, as io.LimitReader would have found.
		return nil, fmt.Errorf("it holds more than the %d bytes it may", limit)
	}
	if int64(cap(d.buf)) < limit+1 {
		d.buf = make([]byte, limit+1)
	}
	buf := d.buf[:limit+1]
	// Read until the end of the stream or limit+1 bytes, as
	// io.ReadAll(io.LimitReader(r, limit+1)) would; a reader that makes
	// no progress is an error, never a loop.
	n, stalled := 0, 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if m > 0 {
			stalled = 0
		} else if stalled++; stalled >= 100 {
			return nil, io.ErrNoProgress
		}
	}
	if int64(n) > limit {
		return nil, fmt.Errorf("it holds more than the %d bytes it may", limit)
	}
	return buf[:n], nil
}

// CheckCompression validates a backup-compression-method value.
func CheckCompression(method string) error {
	switch method {
	case CompressionLZ4, CompressionGzip, CompressionNone:
		return nil
	}
	return fmt.Errorf("%q must be lz4, gzip or none", method)
}
