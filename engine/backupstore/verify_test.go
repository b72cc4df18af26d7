package backupstore

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
)

// damage corrupts, truncates and deletes three blocks of a backup in its
// target, through the driver (as a disk or a user with the bucket's keys
// would), and returns their offsets by reason.
func damage(t *testing.T, d Driver, info *BackupInfo, corrupt, truncate, remove int) map[string]int64 {
	t.Helper()
	key := func(i int) string { return BlockKey(info, info.Blocks[i]) }
	good, err := d.Read(key(truncate), maxBlockFileSize)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d, key(truncate), good[:len(good)/2])
	other, err := d.Read(key(corrupt), maxBlockFileSize)
	if err != nil {
		t.Fatal(err)
	}
	// A valid stream of another block: it decompresses, and hashes to
	// the other block's name, not this one's.
	flipped := append([]byte(nil), other...)
	flipped[len(flipped)/2] ^= 0xff
	mustWrite(t, d, key(corrupt), flipped)
	if err := d.Delete(key(remove)); err != nil {
		t.Fatal(err)
	}
	return map[string]int64{"corrupt": info.Blocks[corrupt].Offset, "truncate": info.Blocks[truncate].Offset, "remove": info.Blocks[remove].Offset}
}

// countingWrites counts what a drill writes and deletes beside its locks.
type countingWrites struct {
	Driver
	writes, deletes atomic.Int64
}

func (d *countingWrites) Write(key string, data []byte) error {
	if !strings.Contains(key, "/locks/") {
		d.writes.Add(1)
	}
	return d.Driver.Write(key, data)
}

func (d *countingWrites) Delete(key string) error {
	if !strings.Contains(key, "/locks/") {
		d.deletes.Add(1)
	}
	return d.Driver.Delete(key)
}

// On file:// and on the real S3 server: a drill of a whole backup passes,
// reading each block once; one block corrupted, one truncated and one
// deleted are each reported with its offset and the right reason, and
// nothing is written or deleted; a full backup then heals them, the
// drill passes again and the backup restores byte for byte.
func TestADrillReportsEachBadBlockWithItsOffsetAndReason(t *testing.T) {
	for kind, tt := range testTargets(t) {
		t.Run(kind, func(t *testing.T) {
			d := &countingWrites{Driver: tt.Driver}
			s := NewStore(tt.Target, d)
			data := distinctBlocks(7, 8)
			b1, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: "id1", Source: &memSource{data: data}})
			if err != nil {
				t.Fatal(err)
			}
			d.writes.Store(0)
			res, err := s.NewVerifier(2).Verify(context.Background(), "vol", b1.Name)
			if err != nil || !res.OK() || res.BlocksRead != 8 || res.Digest != DigestMatched {
				t.Fatalf("a whole backup: %+v, %v", res, err)
			}

			// Blocks 6, 3 and 1 in the config's order (not by offset).
			want := damage(t, tt.Driver, b1, 6, 3, 1)
			v := s.NewVerifier(4)
			res, err = v.Verify(context.Background(), "vol", b1.Name)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() || len(res.BadBlocks) != 3 {
				t.Fatalf("a damaged backup: %+v", res)
			}
			got := map[int64]string{}
			for _, bad := range res.BadBlocks {
				got[bad.Offset] = bad.Reason
				t.Logf("%s", bad)
			}
			for what, reason := range map[string]string{"corrupt": BlockChecksumMismatch, "truncate": BlockTruncated, "remove": BlockMissing} {
				if got[want[what]] != reason {
					t.Errorf("the %s block at %d: reason %q, want %q", what, want[what], got[want[what]], reason)
				}
			}
			if first := res.FirstBad(); first == nil || first.Offset != want["remove"] {
				t.Errorf("the first bad block: %+v, want the one at %d", first, want["remove"])
			}
			if !strings.Contains(res.Problem(), "3 of 8 blocks are bad") {
				t.Errorf("the problem: %q", res.Problem())
			}
			if w, del := d.writes.Load(), d.deletes.Load(); w != 0 || del != 0 {
				t.Errorf("the drills wrote %d and deleted %d objects besides their locks", w, del)
			}

			// The same run reads no block twice.
			res, err = v.Verify(context.Background(), "vol", b1.Name)
			if err != nil || res.BlocksRead != 0 || len(res.BadBlocks) != 3 {
				t.Fatalf("the same backup again in the run: read %d, %+v, %v", res.BlocksRead, res, err)
			}

			b2, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: "id1", Source: &memSource{data: data}, Full: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{b1.Name, b2.Name} {
				res, err := s.NewVerifier(2).Verify(context.Background(), "vol", name)
				if err != nil || !res.OK() {
					t.Fatalf("after the full backup, %s: %+v, %v", name, res, err)
				}
				got, err := restoreBytes(s, "vol", name, len(data))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("restore of %s after the full backup: %v", name, err)
				}
			}
		})
	}
}

// A block two backups share is read once in a run; a backup without a
// digest (made before digests) verifies its blocks and says the digest is
// absent; one whose block list was edited (a block dropped) fails on its
// digest though every block it lists is good; a block past its size
// after decompression, or not decompressing, is corrupt.
func TestADrillReadsSharedBlocksOnceAndChecksTheDigest(t *testing.T) {
	s, _ := newStore(t)
	data := distinctBlocks(3, 4)
	b1, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: &memSource{data: data}})
	if err != nil {
		t.Fatal(err)
	}
	b2, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s2", Source: &memSource{data: data}})
	if err != nil {
		t.Fatal(err)
	}
	v := s.NewVerifier(0)
	r1, err1 := v.Verify(context.Background(), "vol", b1.Name)
	r2, err2 := v.Verify(context.Background(), "vol", b2.Name)
	if err1 != nil || err2 != nil || r1.BlocksRead != 4 || r2.BlocksRead != 0 || !r2.OK() {
		t.Fatalf("two backups sharing 4 blocks: read %d then %d (%v, %v)", r1.BlocksRead, r2.BlocksRead, err1, err2)
	}

	edit := func(name string, change func(*BackupInfo)) {
		info, err := s.Get("vol", name)
		if err != nil {
			t.Fatal(err)
		}
		change(info)
		raw, _ := json.Marshal(info)
		mustWrite(t, s.driver, backupCfgKey("vol", name), raw)
	}
	edit(b1.Name, func(b *BackupInfo) { b.SnapshotDigest = "" })
	res, err := s.NewVerifier(0).Verify(context.Background(), "vol", b1.Name)
	if err != nil || !res.OK() || res.Digest != DigestAbsent || res.BlocksRead != 4 {
		t.Fatalf("a backup without a digest: %+v, %v", res, err)
	}
	edit(b2.Name, func(b *BackupInfo) { b.Blocks = b.Blocks[1:] })
	res, err = s.NewVerifier(0).Verify(context.Background(), "vol", b2.Name)
	if err != nil || res.OK() || res.Digest != DigestMismatch || len(res.BadBlocks) != 0 || !strings.Contains(res.Problem(), "digest") {
		t.Fatalf("a backup with a block dropped from its list: %+v, %v", res, err)
	}
	if _, err := restoreBytes(s, "vol", b2.Name, len(data)); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("a restore of that backup: %v", err)
	}

	for _, tc := range []struct {
		name, method string
		stored       []byte
		want         string
	}{
		{"not lz4", CompressionLZ4, []byte("not a block"), BlockCorrupt},
		{"not gzip", CompressionGzip, []byte("not a block"), BlockCorrupt},
		{"raw and short", CompressionNone, data[:100], BlockTruncated},
		{"raw and long", CompressionNone, append(data[:BlockSize:BlockSize], 1), BlockCorrupt},
		{"raw, other content", CompressionNone, data[BlockSize : 2*BlockSize], BlockChecksumMismatch},
	} {
		info := &BackupInfo{Name: "b", VolumeName: "vol", VolumeSize: int64(len(data)), Compression: tc.method,
			Blocks: []BlockRef{{Offset: 0, Checksum: b1.Blocks[0].Checksum}}}
		mustWrite(t, s.driver, BlockKey(info, info.Blocks[0]), tc.stored)
		_, reason, detail, err := s.checkBlock(BlockKey(info, info.Blocks[0]), tc.method, info.Blocks[0], BlockSize)
		if err != nil || reason != tc.want {
			t.Errorf("%s: reason %q (%s), %v; want %q", tc.name, reason, detail, err, tc.want)
		}
	}
}

// An invalid config is a failed drill saying why, not an error; a
// backup the target does not hold is an error.
func TestADrillOfAnInvalidConfigSaysWhy(t *testing.T) {
	s, _ := newStore(t)
	mustWrite(t, s.driver, backupCfgKey("vol", "b1"), []byte(`{"name":"b1","volumeName":"vol","volumeSize":-1}`))
	res, err := s.NewVerifier(0).Verify(context.Background(), "vol", "b1")
	if err != nil || res.OK() || !strings.Contains(res.Problem(), "volumeSize") {
		t.Fatalf("an invalid config: %+v, %v", res, err)
	}
	if _, err := s.NewVerifier(0).Verify(context.Background(), "vol", "b2"); err == nil {
		t.Fatal("a drill of a backup the target lacks did not fail")
	}
}
