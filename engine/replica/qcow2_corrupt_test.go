package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// testQcow2Image is a 3-cluster-table image of 4 KiB clusters: random
// data, an unallocated hole, a zero cluster and compressed clusters.
func testQcow2Image(t testing.TB, version uint32) ([]byte, []byte, testQcow2Layout) {
	t.Helper()
	const cs = 4096
	data := fill(7, 2<<20+5*512) // spans two L2 tables (512 clusters each)
	clear(data[10*cs : 14*cs])   // a hole
	img := testQcow2{version: version, clusterBits: 12, data: data,
		zero: map[int64]bool{}, compressed: map[int64]bool{3: true, 4: true, 600: true}}
	if version == 3 {
		img.zero[20] = true
		clear(data[20*cs : 21*cs])
	}
	file, lay := buildQcow2(t, img)
	return file, data, lay
}

func TestQcow2ReaderReadsAHandBuiltImage(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		file, data, _ := testQcow2Image(t, version)
		q, err := openTestQcow2(t, file)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		checkReads(t, q, data, 4096)
	}
}

// TestQcow2ReaderRefuses: images a backing file may not use, and corrupt
// ones, are refused with the reason, at open or at the read that meets
// the bad entry; never a panic or wrong data.
func TestQcow2ReaderRefuses(t *testing.T) {
	be := binary.BigEndian
	base, _, lay := testQcow2Image(t, 3)
	cs := int64(4096)
	// firstData is the L2 entry of virtual cluster 0, a data cluster.
	firstData := lay.l2Offset
	compressedEntry := lay.l2Offset + 3*8

	cases := []struct {
		name   string
		patch  func(f []byte) []byte
		want   error
		reason string
		atRead bool
	}{
		{name: "version 4", want: ErrQcow2Unsupported, reason: "version 4",
			patch: func(f []byte) []byte { be.PutUint32(f[4:], 4); return f }},
		{name: "clusters of 256 bytes", want: ErrQcow2Corrupt, reason: "cluster_bits 8",
			patch: func(f []byte) []byte { be.PutUint32(f[20:], 8); return f }},
		{name: "clusters of 4 MiB", want: ErrQcow2Corrupt, reason: "cluster_bits 22",
			patch: func(f []byte) []byte { be.PutUint32(f[20:], 22); return f }},
		{name: "its own backing file", want: ErrQcow2Unsupported, reason: `backing file of its own ("base.raw")`,
			patch: func(f []byte) []byte {
				copy(f[200:], "base.raw")
				be.PutUint64(f[8:], 200)
				be.PutUint32(f[16:], 8)
				return f
			}},
		{name: "a backing file name outside the header cluster", want: ErrQcow2Corrupt, reason: "backing file name",
			patch: func(f []byte) []byte { be.PutUint64(f[8:], 1<<40); be.PutUint32(f[16:], 8); return f }},
		{name: "AES encryption", want: ErrQcow2Unsupported, reason: "encrypted",
			patch: func(f []byte) []byte { be.PutUint32(f[32:], 1); return f }},
		{name: "LUKS encryption", want: ErrQcow2Unsupported, reason: "encrypted",
			patch: func(f []byte) []byte { be.PutUint32(f[32:], 2); return f }},
		{name: "an external data file", want: ErrQcow2Unsupported, reason: "external data file",
			patch: func(f []byte) []byte { f[79] |= qcow2IncompatDataFile; return f }},
		{name: "extended L2 entries", want: ErrQcow2Unsupported, reason: "extended L2",
			patch: func(f []byte) []byte { f[79] |= qcow2IncompatExtendedL2; return f }},
		{name: "marked corrupt", want: ErrQcow2Unsupported, reason: "marked corrupt",
			patch: func(f []byte) []byte { f[79] |= qcow2IncompatCorrupt; return f }},
		{name: "zstd compression", want: ErrQcow2Unsupported, reason: "zstd",
			patch: func(f []byte) []byte { f[79] |= qcow2IncompatCompression; f[104] = 1; return f }},
		{name: "unknown incompatible features", want: ErrQcow2Unsupported, reason: "unknown incompatible feature bits 15, 40",
			patch: func(f []byte) []byte { f[78] |= 1 << 7; f[74] |= 1; return f }},
		{name: "a header shorter than version 3's", want: ErrQcow2Corrupt, reason: "header_length 96",
			patch: func(f []byte) []byte { be.PutUint32(f[100:], 96); return f }},
		{name: "a file cut in its header cluster", want: ErrQcow2Corrupt, reason: "less than its header cluster",
			patch: func(f []byte) []byte { return f[:3000] }},
		{name: "a file cut in its header", want: ErrQcow2Corrupt, reason: "fewer than a header",
			patch: func(f []byte) []byte { return f[:50] }},
		{name: "an absurd virtual size", want: ErrQcow2Corrupt, reason: "absurd",
			patch: func(f []byte) []byte { be.PutUint64(f[24:], 1<<63); return f }},
		{name: "an L1 table too small for the size", want: ErrQcow2Corrupt, reason: "too small for the virtual size",
			patch: func(f []byte) []byte { be.PutUint64(f[24:], 1<<40); return f }},
		{name: "an absurd L1 table", want: ErrQcow2Corrupt, reason: "more than qemu's",
			patch: func(f []byte) []byte { be.PutUint32(f[36:], 1<<30); return f }},
		{name: "the L1 table past the end of the file", want: ErrQcow2Corrupt, reason: "the L1 table (16 bytes at 1099511627776) ends past the end",
			patch: func(f []byte) []byte { be.PutUint64(f[40:], 1<<40); return f }},
		{name: "the L1 table in the header cluster", want: ErrQcow2Corrupt, reason: "overlaps the header cluster",
			patch: func(f []byte) []byte { be.PutUint64(f[40:], 0); return f }},
		{name: "the L1 table off a cluster boundary", want: ErrQcow2Corrupt, reason: "not on a cluster boundary",
			patch: func(f []byte) []byte { be.PutUint64(f[40:], uint64(lay.l1Offset+512)); return f }},
		{name: "the L1 table over the refcount table", want: ErrQcow2Corrupt, reason: "overlaps the refcount table",
			patch: func(f []byte) []byte { be.PutUint64(f[48:], uint64(lay.l1Offset)); return f }},
		{name: "an L2 table past the end of the file", want: ErrQcow2Corrupt, reason: "the L2 table of L1 entry 1",
			patch: func(f []byte) []byte { be.PutUint64(f[lay.l1Offset+8:], 1<<50); return f }},
		{name: "an L2 table on the L1 table", want: ErrQcow2Corrupt, reason: "overlaps the L1 table",
			patch: func(f []byte) []byte { be.PutUint64(f[lay.l1Offset:], uint64(lay.l1Offset)); return f }},
		{name: "a data cluster past the end of the file", want: ErrQcow2Corrupt, reason: "past the end of the file", atRead: true,
			patch: func(f []byte) []byte { be.PutUint64(f[firstData:], 1<<45); return f }},
		{name: "a data cluster on the header", want: ErrQcow2Corrupt, reason: "data cluster at 4096 overlaps the refcount table", atRead: true,
			patch: func(f []byte) []byte { be.PutUint64(f[firstData:], uint64(cs)); return f }},
		{name: "a data cluster off a cluster boundary", want: ErrQcow2Corrupt, reason: "not on a cluster boundary", atRead: true,
			patch: func(f []byte) []byte { be.PutUint64(f[firstData:], uint64(lay.dataOffset+512)); return f }},
		{name: "compressed data past the end of the file", want: ErrQcow2Corrupt, reason: "compressed data", atRead: true,
			patch: func(f []byte) []byte { be.PutUint64(f[compressedEntry:], qcow2Compressed|1<<40); return f }},
		{name: "compressed data that does not inflate", want: ErrQcow2Corrupt, reason: "does not inflate", atRead: true,
			patch: func(f []byte) []byte {
				host := be.Uint64(f[compressedEntry:]) & (1<<(62-4) - 1)
				for i := range 64 {
					f[host+uint64(i)] = 0xff
				}
				return f
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := c.patch(bytes.Clone(base))
			q, err := openTestQcow2(t, file)
			if c.atRead {
				if err != nil {
					t.Fatalf("open: %v, want the error at the read", err)
				}
				_, err = q.ReadAt(make([]byte, 5*cs), 0)
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("err = %v, want %v naming %q", err, c.want, c.reason)
			}
		})
	}
}

// TestQcow2DirtyImageIsRead: the dirty bit only says the refcounts may be
// stale, which a reader does not use.
func TestQcow2DirtyImageIsRead(t *testing.T) {
	file, data, _ := testQcow2Image(t, 3)
	file[79] |= qcow2IncompatDirty
	q, err := openTestQcow2(t, file)
	if err != nil {
		t.Fatal(err)
	}
	checkReads(t, q, data, 4096)
}

// FuzzQcow2Header opens mutated qcow2 files and reads them: any input is
// refused with an error or read, never a panic.
func FuzzQcow2Header(f *testing.F) {
	for _, v := range []uint32{2, 3} {
		// Small, so that the fuzzer's minimizing stays quick.
		img, _ := buildQcow2(f, testQcow2{version: v, clusterBits: 9, data: fill(3, 3<<10),
			zero: map[int64]bool{1: true}, compressed: map[int64]bool{2: true}})
		f.Add(img)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		q, err := newQcow2Reader(bytes.NewReader(file), int64(len(file)), nil)
		if err != nil {
			return
		}
		buf := make([]byte, 64<<10)
		for _, off := range []int64{0, 511, 3<<10 - 100, q.Size() / 2, q.Size() - 1} {
			if off >= 0 {
				q.ReadAt(buf, off)
			}
		}
	})
}
