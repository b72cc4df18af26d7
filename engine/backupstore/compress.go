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
	var r io.Reader
	switch method {
	case CompressionNone:
		r = bytes.NewReader(z)
	case CompressionGzip:
		g, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, err
		}
		r = g
	case CompressionLZ4:
		r = lz4.NewReader(bytes.NewReader(z))
	default:
		return nil, fmt.Errorf("compression %q is not known", method)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("it holds more than the %d bytes it may", limit)
	}
	return data, nil
}

// CheckCompression validates a backup-compression-method value.
func CheckCompression(method string) error {
	switch method {
	case CompressionLZ4, CompressionGzip, CompressionNone:
		return nil
	}
	return fmt.Errorf("%q must be lz4, gzip or none", method)
}
