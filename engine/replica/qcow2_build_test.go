package replica

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"testing"
)

// testQcow2 describes a small qcow2 image that buildQcow2 lays out by
// hand, so tests of the reader's checks and the fuzz test need no qemu.
type testQcow2 struct {
	version     uint32
	clusterBits uint32
	// data is the virtual disk. All-zero clusters stay unallocated unless
	// zero or compressed name them.
	data []byte
	// zero and compressed name virtual clusters written as zero clusters
	// (L2 bit 0) and as raw deflate.
	zero, compressed map[int64]bool
}

// The layout buildQcow2 writes: header cluster, refcount table cluster,
// L1 table, L2 tables, data clusters, compressed data.
type testQcow2Layout struct {
	l1Offset, l2Offset, dataOffset int64
}

func buildQcow2(t testing.TB, img testQcow2) ([]byte, testQcow2Layout) {
	t.Helper()
	be := binary.BigEndian
	cs := int64(1) << img.clusterBits
	size := int64(len(img.data))
	perTable := cs / 8
	clusters := (size + cs - 1) / cs
	l1Entries := (clusters + perTable - 1) / perTable
	roundUp := func(n int64) int64 { return (n + cs - 1) / cs * cs }

	var lay testQcow2Layout
	lay.l1Offset = 2 * cs
	lay.l2Offset = lay.l1Offset + roundUp(max(l1Entries*8, 1))
	lay.dataOffset = lay.l2Offset + l1Entries*cs
	out := make([]byte, lay.dataOffset)

	hdr := out[:cs]
	copy(hdr, qcow2Magic)
	be.PutUint32(hdr[4:], img.version)
	be.PutUint32(hdr[20:], img.clusterBits)
	be.PutUint64(hdr[24:], uint64(size))
	be.PutUint32(hdr[36:], uint32(l1Entries))
	be.PutUint64(hdr[40:], uint64(lay.l1Offset))
	be.PutUint64(hdr[48:], uint64(cs)) // refcount table
	be.PutUint32(hdr[56:], 1)
	if img.version == 3 {
		be.PutUint32(hdr[96:], 4)    // refcount_order: 16 bits
		be.PutUint32(hdr[100:], 112) // header_length
	}
	for i := range l1Entries {
		be.PutUint64(out[lay.l1Offset+i*8:], uint64(lay.l2Offset+i*cs)|1<<63)
	}

	var compressed []struct {
		l2   int64
		data []byte
	}
	for c := range clusters {
		chunk := make([]byte, cs)
		copy(chunk, img.data[c*cs:])
		l2 := lay.l2Offset + c/perTable*cs + c%perTable*8
		switch {
		case img.zero[c]:
			be.PutUint64(out[l2:], qcow2ZeroFlag)
		case img.compressed[c]:
			var z bytes.Buffer
			w, _ := flate.NewWriter(&z, flate.BestCompression)
			w.Write(chunk)
			w.Close()
			compressed = append(compressed, struct {
				l2   int64
				data []byte
			}{l2, z.Bytes()})
		case bytes.Count(chunk, []byte{0}) == len(chunk):
		default:
			be.PutUint64(out[l2:], uint64(len(out))|1<<63)
			out = append(out, chunk...)
		}
	}
	x := 62 - (img.clusterBits - 8)
	for _, c := range compressed {
		host := int64(len(out))
		sectors := (int64(len(c.data)) + host%512 + 511) / 512
		be.PutUint64(out[c.l2:], qcow2Compressed|uint64(sectors-1)<<x|uint64(host))
		out = append(out, c.data...)
		// Leave the next one mid-sector, as qemu packs them.
		out = append(out, make([]byte, 3)...)
	}
	return out, lay
}

// openTestQcow2 opens a qcow2 image held in memory.
func openTestQcow2(t testing.TB, file []byte) (*qcow2Reader, error) {
	t.Helper()
	return newQcow2Reader(bytes.NewReader(file), int64(len(file)), nil)
}

// checkReads compares what r reads with want across odd offsets and
// lengths, cluster boundaries and the whole disk.
func checkReads(t *testing.T, r backingReader, want []byte, clusterSize int64) {
	t.Helper()
	if r.Size() != int64(len(want)) {
		t.Fatalf("Size() = %d, want %d", r.Size(), len(want))
	}
	read := func(off, n int64) {
		got := make([]byte, n)
		m, err := r.ReadAt(got, off)
		end := min(off+n, int64(len(want)))
		if int64(m) != end-off || (err != nil && end == off+n) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, m, err)
		}
		if !bytes.Equal(got[:m], want[off:end]) {
			t.Fatalf("ReadAt(%d bytes at %d): the bytes differ from the source", n, off)
		}
	}
	read(0, int64(len(want)))
	for off := clusterSize - 7; off < int64(len(want)); off += 5 * clusterSize {
		read(off, 13)            // across a cluster boundary
		read(off, 3*clusterSize) // across several
	}
	seed := int64(len(want))
	for range 300 {
		seed = seed*6364136223846793005 + 1442695040888963407
		off := int64(uint64(seed)>>1) % int64(len(want))
		n := int64(uint64(seed)>>40)%(200<<10) + 1
		read(off, n)
	}
	read(int64(len(want))-100, 4096) // past the end: a short read
}
