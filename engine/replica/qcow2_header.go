package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

// The qcow2 header, as qemu documents it (docs/interop/qcow2.txt): every
// field is big-endian; version 2 stops at byte 72, version 3 adds the
// feature bits and says how long its header is.

// ErrQcow2Unsupported marks a valid qcow2 file that uses something a
// backing file may not: its own backing file, encryption, an external
// data file, extended L2 entries, zstd compression, unknown features.
var ErrQcow2Unsupported = errors.New("qcow2: not supported as a backing file")

// ErrQcow2Corrupt marks a qcow2 file whose header or tables are not
// consistent: offsets past the end of the file, unaligned or overlapping
// tables, absurd sizes.
var ErrQcow2Corrupt = errors.New("qcow2: corrupt")

const (
	qcow2HeaderV2Len = 72
	qcow2HeaderV3Len = 104
	// qcow2MaxHeaderRead is what openQcow2 reads of the file's start to
	// parse the header: the v3 header with the compression type field.
	qcow2MaxHeaderRead = 112

	qcow2MinClusterBits = 9  // 512 B, the least qemu allows
	qcow2MaxClusterBits = 21 // 2 MiB, the most qemu allows

	// qcow2MaxL1Entries bounds the L1 table as qemu does (32 MiB of
	// entries).
	qcow2MaxL1Entries = 32 << 20 / 8
	// qcow2MaxRefcountTableBytes bounds the refcount table as qemu does.
	qcow2MaxRefcountTableBytes = 8 << 20
	// qcow2MaxBackingNameLen is the longest backing file name qemu writes.
	qcow2MaxBackingNameLen = 1023
)

// The incompatible feature bits of a version 3 header.
const (
	qcow2IncompatDirty       = 1 << 0
	qcow2IncompatCorrupt     = 1 << 1
	qcow2IncompatDataFile    = 1 << 2
	qcow2IncompatCompression = 1 << 3
	qcow2IncompatExtendedL2  = 1 << 4
	qcow2IncompatKnown       = qcow2IncompatDirty | qcow2IncompatCorrupt | qcow2IncompatDataFile | qcow2IncompatCompression | qcow2IncompatExtendedL2
	qcow2CompressionZlib     = 0
	qcow2CompressionZstd     = 1
	qcow2EncryptionNone      = 0
	qcow2EncryptionAES       = 1
	qcow2EncryptionLUKS      = 2
)

// qcow2Header is what the reader needs of a header, checked.
type qcow2Header struct {
	version     uint32
	clusterBits uint32
	// size is the virtual disk's size in bytes.
	size int64
	// l1Offset and l1Entries place the L1 table; l1Entries counts only
	// the entries the virtual size needs (the table may hold more).
	l1Offset  int64
	l1Entries int64
	// refcountOffset and refcountBytes place the refcount table, which
	// the reader never reads but no data may overlap.
	refcountOffset int64
	refcountBytes  int64
	// backingNameOffset and backingNameLen place the name of the image's
	// own backing file, when it has one (refused once the name is read).
	backingNameOffset int64
	backingNameLen    int64
}

func (h *qcow2Header) clusterSize() int64 { return 1 << h.clusterBits }

// l2Entries is the number of entries of an L2 table, one cluster of
// 8-byte entries.
func (h *qcow2Header) l2Entries() int64 { return h.clusterSize() / 8 }

// parseQcow2Header checks the header at the start of a qcow2 file of
// fileSize bytes. buf holds the file's first bytes (at most
// qcow2MaxHeaderRead). The image's own backing file, if any, is reported
// through backingNameOffset: the caller reads the name for its error.
func parseQcow2Header(buf []byte, fileSize int64) (*qcow2Header, error) {
	be := binary.BigEndian
	if len(buf) < qcow2HeaderV2Len {
		return nil, fmt.Errorf("%w: the file holds %d bytes, fewer than a header's %d", ErrQcow2Corrupt, len(buf), qcow2HeaderV2Len)
	}
	if string(buf[:4]) != string(qcow2Magic) {
		return nil, fmt.Errorf("%w: no qcow2 magic", ErrQcow2Corrupt)
	}
	h := &qcow2Header{version: be.Uint32(buf[4:])}
	if h.version != 2 && h.version != 3 {
		return nil, fmt.Errorf("%w: version %d (only versions 2 and 3 are read)", ErrQcow2Unsupported, h.version)
	}
	h.clusterBits = be.Uint32(buf[20:])
	if h.clusterBits < qcow2MinClusterBits || h.clusterBits > qcow2MaxClusterBits {
		return nil, fmt.Errorf("%w: cluster_bits %d: must be %d to %d (clusters of 512 B to 2 MiB)", ErrQcow2Corrupt, h.clusterBits, qcow2MinClusterBits, qcow2MaxClusterBits)
	}
	cs := h.clusterSize()

	headerLen := int64(qcow2HeaderV2Len)
	if h.version == 3 {
		if len(buf) < qcow2HeaderV3Len {
			return nil, fmt.Errorf("%w: the file holds %d bytes, fewer than a version 3 header's %d", ErrQcow2Corrupt, len(buf), qcow2HeaderV3Len)
		}
		headerLen = int64(be.Uint32(buf[100:]))
		if headerLen < qcow2HeaderV3Len || headerLen%8 != 0 || headerLen > cs {
			return nil, fmt.Errorf("%w: header_length %d: must be a multiple of 8 from %d to the cluster size %d", ErrQcow2Corrupt, headerLen, qcow2HeaderV3Len, cs)
		}
		if err := checkQcow2Features(be.Uint64(buf[72:]), buf, headerLen); err != nil {
			return nil, err
		}
		if order := be.Uint32(buf[96:]); order > 6 {
			return nil, fmt.Errorf("%w: refcount_order %d: at most 6", ErrQcow2Corrupt, order)
		}
	}
	if fileSize < cs {
		// qemu writes the header cluster whole; a shorter file was cut.
		return nil, fmt.Errorf("%w: the file holds %d bytes, less than its header cluster of %d", ErrQcow2Corrupt, fileSize, cs)
	}

	switch m := be.Uint32(buf[32:]); m {
	case qcow2EncryptionNone:
	case qcow2EncryptionAES, qcow2EncryptionLUKS:
		return nil, fmt.Errorf("%w: the image is encrypted (crypt_method %d); decrypt it with qemu-img convert first", ErrQcow2Unsupported, m)
	default:
		return nil, fmt.Errorf("%w: unknown crypt_method %d", ErrQcow2Unsupported, m)
	}

	if off, n := be.Uint64(buf[8:]), int64(be.Uint32(buf[16:])); off != 0 && n != 0 {
		if n > qcow2MaxBackingNameLen || off < uint64(headerLen) || off > uint64(cs) || int64(off)+n > cs {
			return nil, fmt.Errorf("%w: the backing file name (%d bytes at %d) is not inside the header cluster", ErrQcow2Corrupt, n, off)
		}
		h.backingNameOffset, h.backingNameLen = int64(off), n
	}

	vsize := be.Uint64(buf[24:])
	if vsize > 1<<62 {
		return nil, fmt.Errorf("%w: virtual size %d is absurd", ErrQcow2Corrupt, vsize)
	}
	h.size = int64(vsize)
	// One L1 entry maps one L2 table, which maps l2Entries clusters.
	l2Span := uint64(cs) * uint64(h.l2Entries())
	needed := (vsize + l2Span - 1) / l2Span
	l1Size := uint64(be.Uint32(buf[36:]))
	if l1Size > qcow2MaxL1Entries {
		return nil, fmt.Errorf("%w: l1_size %d: more than qemu's %d entries", ErrQcow2Corrupt, l1Size, qcow2MaxL1Entries)
	}
	if l1Size < needed {
		return nil, fmt.Errorf("%w: l1_size %d is too small for the virtual size %d (needs %d entries)", ErrQcow2Corrupt, l1Size, vsize, needed)
	}
	h.l1Entries = int64(needed)
	l1Off := be.Uint64(buf[40:])
	if needed > 0 {
		if err := checkQcow2Table("the L1 table", l1Off, uint64(needed)*8, cs, fileSize); err != nil {
			return nil, err
		}
	}
	h.l1Offset = int64(l1Off)

	rtOff, rtClusters := be.Uint64(buf[48:]), uint64(be.Uint32(buf[56:]))
	if rtClusters*uint64(cs) > qcow2MaxRefcountTableBytes {
		return nil, fmt.Errorf("%w: refcount_table_clusters %d: more than qemu's %d bytes", ErrQcow2Corrupt, rtClusters, qcow2MaxRefcountTableBytes)
	}
	if rtOff%uint64(cs) != 0 || rtOff > 1<<62 {
		return nil, fmt.Errorf("%w: refcount_table_offset %d is not a cluster boundary", ErrQcow2Corrupt, rtOff)
	}
	h.refcountOffset, h.refcountBytes = int64(rtOff), int64(rtClusters)*cs
	if needed > 0 && rtClusters > 0 && overlaps(h.l1Offset, h.l1Entries*8, h.refcountOffset, h.refcountBytes) {
		return nil, fmt.Errorf("%w: the L1 table at %d overlaps the refcount table at %d", ErrQcow2Corrupt, h.l1Offset, h.refcountOffset)
	}
	return h, nil
}

// checkQcow2Features refuses the incompatible features a backing file
// may not use, naming them.
func checkQcow2Features(incompat uint64, buf []byte, headerLen int64) error {
	var refused []string
	if incompat&qcow2IncompatCorrupt != 0 {
		refused = append(refused, "marked corrupt by qemu (check it with qemu-img check)")
	}
	if incompat&qcow2IncompatDataFile != 0 {
		refused = append(refused, "an external data file")
	}
	if incompat&qcow2IncompatExtendedL2 != 0 {
		refused = append(refused, "extended L2 entries (subclusters)")
	}
	if incompat&qcow2IncompatCompression != 0 {
		if headerLen <= 104 || len(buf) <= 104 {
			return fmt.Errorf("%w: the compression type bit is set but the header has no compression_type field", ErrQcow2Corrupt)
		}
		switch t := buf[104]; t {
		case qcow2CompressionZlib:
		case qcow2CompressionZstd:
			refused = append(refused, "zstd compression (convert it with qemu-img convert -c -o compression_type=zlib)")
		default:
			return fmt.Errorf("%w: unknown compression_type %d", ErrQcow2Unsupported, t)
		}
	}
	if unknown := incompat &^ qcow2IncompatKnown; unknown != 0 {
		var bitNames []string
		for unknown != 0 {
			b := bits.TrailingZeros64(unknown)
			bitNames = append(bitNames, fmt.Sprint(b))
			unknown &^= 1 << b
		}
		refused = append(refused, "unknown incompatible feature bits "+strings.Join(bitNames, ", "))
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: the image uses %s", ErrQcow2Unsupported, strings.Join(refused, "; "))
	}
	return nil
}

// checkQcow2Table checks that a table of n bytes at off starts on a
// cluster boundary after the header cluster and ends inside the file.
func checkQcow2Table(what string, off, n uint64, cs, fileSize int64) error {
	switch {
	case off%uint64(cs) != 0:
		return fmt.Errorf("%w: %s at %d is not on a cluster boundary", ErrQcow2Corrupt, what, off)
	case off < uint64(cs):
		return fmt.Errorf("%w: %s at %d overlaps the header cluster", ErrQcow2Corrupt, what, off)
	case off >= uint64(fileSize) || n > uint64(fileSize)-off:
		return fmt.Errorf("%w: %s (%d bytes at %d) ends past the end of the file (%d bytes)", ErrQcow2Corrupt, what, n, off, fileSize)
	}
	return nil
}

// overlaps tells whether [a, a+an) and [b, b+bn) share a byte.
func overlaps(a, an, b, bn int64) bool {
	return an > 0 && bn > 0 && a < b+bn && b < a+an
}
