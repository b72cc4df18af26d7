package backupstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// A drill (Verify) reads every block a backup references, once, and
// checks that it exists, decompresses to its place and hashes to its
// name; that the backup config and the volume record pass their rules;
// and that the config's block list gives the digest recorded at backup
// time. It never writes to the target but its lock (a restore's, so no
// deletion frees a block under it and backups go on beside it), never
// deletes, and trusts nothing it reads: every read is capped as a
// restore's is.

// Why a block fails a drill.
const (
	// BlockMissing: the target has no object under the block's key.
	BlockMissing = "missing"
	// BlockTruncated: the object ends before the block does (its
	// compressed stream is cut short, or it decompresses to fewer bytes
	// than the block holds).
	BlockTruncated = "truncated"
	// BlockCorrupt: the object does not decompress, or decompresses to
	// more bytes than the block may hold.
	BlockCorrupt = "corrupt"
	// BlockChecksumMismatch: the object decompresses to the block's size,
	// but its SHA-256 is not the block's name.
	BlockChecksumMismatch = "checksumMismatch"
	// BlockUnreadable: the object is not one a store writes (larger than
	// any block, or on file:// not a regular file).
	BlockUnreadable = "unreadable"
)

// What a drill found of the backup's digest.
const (
	DigestMatched  = "matched"
	DigestAbsent   = "absent" // the backup predates digests
	DigestMismatch = "mismatch"
)

// BadBlock is a block a drill found bad.
type BadBlock struct {
	Offset   int64  `json:"offset"`
	Checksum string `json:"checksum"`
	Reason   string `json:"reason"`
	Detail   string `json:"detail,omitempty"`
}

func (b BadBlock) String() string {
	s := fmt.Sprintf("block %s at offset %d is %s", b.Checksum, b.Offset, b.Reason)
	if b.Detail != "" {
		s += " (" + b.Detail + ")"
	}
	return s
}

// VerifyResult is what a drill found in one backup.
type VerifyResult struct {
	Volume, Backup string
	// Blocks is how many blocks the backup lists; BlocksRead how many this
	// drill read (a block read before in the same run, for this backup or
	// another, is not read again), BytesRead their stored bytes.
	Blocks     int
	BlocksRead int
	BytesRead  int64
	// BadBlocks are every bad block, in order of offset.
	BadBlocks []BadBlock
	// ConfigError says why the backup config breaks a rule; nothing else
	// is checked then.
	ConfigError string
	// VolumeRecordError says why the volume record breaks a rule;
	// VolumeRecordMissing that the target has none (not a failure: the
	// next backup writes it again).
	VolumeRecordError   string
	VolumeRecordMissing bool
	// Digest is DigestMatched, DigestAbsent or DigestMismatch;
	// DigestError says why on a mismatch.
	Digest      string
	DigestError string
	Duration    time.Duration
}

// OK tells whether the backup passed: every block good, the config, the
// volume record and the digest (when recorded) valid.
func (r *VerifyResult) OK() bool {
	return len(r.BadBlocks) == 0 && r.ConfigError == "" && r.VolumeRecordError == "" && r.Digest != DigestMismatch
}

// FirstBad is the bad block of lowest offset, nil when none.
func (r *VerifyResult) FirstBad() *BadBlock {
	if len(r.BadBlocks) == 0 {
		return nil
	}
	return &r.BadBlocks[0]
}

// Problem sums up why the backup failed, "" when it passed.
func (r *VerifyResult) Problem() string {
	switch {
	case r.ConfigError != "":
		return "the backup config is invalid: " + r.ConfigError
	case len(r.BadBlocks) > 0:
		s := fmt.Sprintf("%d of %d blocks are bad:", len(r.BadBlocks), r.Blocks)
		for i, bad := range r.BadBlocks {
			if i == maxBadBlocksSaid {
				s += fmt.Sprintf(" and %d more", len(r.BadBlocks)-i)
				break
			}
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf(" offset %d %s", bad.Offset, bad.Reason)
		}
		if r.Digest == DigestMismatch {
			s += "; and " + r.DigestError
		}
		return s
	case r.Digest == DigestMismatch:
		return r.DigestError
	case r.VolumeRecordError != "":
		return "the volume record is invalid: " + r.VolumeRecordError
	}
	return ""
}

// maxBadBlocksSaid bounds the bad blocks Problem names (a status
// message, an event): the result holds them all.
const maxBadBlocksSaid = 10

// Verifier runs drills. One Verifier is one run: a block it has read is
// not read again by a later Verify of the same Verifier (blocks are
// content-addressed and never rewritten with other content). Safe for
// concurrent use.
type Verifier struct {
	s *Store
	// Concurrency is how many blocks are read and checked at once
	// (DefaultConcurrency when 0).
	Concurrency int
	// Progress, when set, receives the percentage of a backup's blocks
	// checked.
	Progress func(volume, backup string, percent int)

	mu     sync.Mutex
	checks map[string]*blockCheck // by block key
}

// blockCheck is one block's check in a run; done is closed once reason
// is set ("" for a good block).
type blockCheck struct {
	done           chan struct{}
	reason, detail string
	err            error // the target could not be read: no verdict
}

// NewVerifier returns a run's Verifier on the store.
func (s *Store) NewVerifier(concurrency int) *Verifier {
	return &Verifier{s: s, Concurrency: concurrency, checks: map[string]*blockCheck{}}
}

// Verify drills one backup. It returns an error only when the drill could
// not be made (the target cannot be read, the backup is gone, the lock
// was lost); what it finds wrong with the backup is in the result.
func (v *Verifier) Verify(ctx context.Context, volume, backup string) (*VerifyResult, error) {
	start := time.Now()
	if err := checkNames(volume, backup); err != nil {
		return nil, err
	}
	lock, err := v.s.lock(volume, lockRestore)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	res := &VerifyResult{Volume: volume, Backup: backup}
	switch _, err := v.s.Volume(volume); {
	case errors.Is(err, ErrNotExist):
		res.VolumeRecordMissing = true
	case errors.Is(err, ErrInvalid):
		res.VolumeRecordError = err.Error()
	case err != nil:
		return nil, fmt.Errorf("read volume %s in the backup target: %w", volume, err)
	}
	info, err := v.s.Get(volume, backup)
	switch {
	case errors.Is(err, ErrInvalid):
		res.ConfigError = err.Error()
		res.Duration = time.Since(start)
		return res, nil
	case err != nil:
		return nil, err
	}
	res.Blocks = len(info.Blocks)
	res.Digest = DigestAbsent
	if info.SnapshotDigest != "" {
		res.Digest = DigestMatched
		if err := info.checkDigest(); err != nil {
			res.Digest, res.DigestError = DigestMismatch, err.Error()
		}
	}
	if err := v.checkBlocks(ctx, info, res); err != nil {
		return nil, err
	}
	// A lock lost meanwhile may have let a deletion free blocks found
	// missing: the findings cannot be trusted.
	if err := lock.check(); err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

// checkBlocks checks every block of the backup on Concurrency workers,
// in order of offset, and records the bad ones in res.
func (v *Verifier) checkBlocks(ctx context.Context, info *BackupInfo, res *VerifyResult) error {
	workers := v.Concurrency
	if workers <= 0 {
		workers = DefaultConcurrency
	}
	type verdict struct{ reason, detail string }
	verdicts := make([]verdict, len(info.Blocks))
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		done     int
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				check, read, n, err := v.check(info, info.Blocks[i])
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					verdicts[i] = verdict{check.reason, check.detail}
				}
				if read {
					res.BlocksRead++
					res.BytesRead += n
				}
				done++
				if v.Progress != nil {
					v.Progress(info.VolumeName, info.Name, done*100/len(info.Blocks))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range info.Blocks {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, ref := range info.Blocks {
		if verdicts[i].reason != "" {
			res.BadBlocks = append(res.BadBlocks, BadBlock{Offset: ref.Offset, Checksum: ref.Checksum, Reason: verdicts[i].reason, Detail: verdicts[i].detail})
		}
	}
	return nil
}

// check returns the block's verdict: from this run when another worker or
// an earlier drill checked its key, else read now (read is then true, n
// its stored bytes). err is a target that could not be read, which is no
// verdict on the block: the key is checked again next time.
func (v *Verifier) check(info *BackupInfo, ref BlockRef) (c *blockCheck, read bool, n int64, err error) {
	key := blockKey(info.VolumeName, ref.Checksum, info.Compression)
	v.mu.Lock()
	c, seen := v.checks[key]
	if !seen {
		c = &blockCheck{done: make(chan struct{})}
		v.checks[key] = c
	}
	v.mu.Unlock()
	if seen {
		<-c.done
		return c, false, 0, c.err
	}
	defer close(c.done)
	// Blocks of the same checksum hold the same bytes; the last block
	// of a volume may be shorter, and is checked at its own size.
	n, c.reason, c.detail, c.err = v.s.checkBlock(key, info.Compression, ref, min(int64(BlockSize), info.VolumeSize-ref.Offset))
	if c.err != nil {
		v.mu.Lock()
		delete(v.checks, key)
		v.mu.Unlock()
	}
	return c, c.err == nil, n, c.err
}

// checkBlock reads one block and says what is wrong with it ("" when
// nothing). A panic in it (a decoder's on hostile input) is the block's
// corruption, never the manager's.
func (s *Store) checkBlock(key, method string, ref BlockRef, size int64) (n int64, reason, detail string, err error) {
	defer func() {
		if r := recover(); r != nil {
			logrus.WithFields(logrus.Fields{"block": key, "panic": fmt.Sprint(r), "stack": string(debug.Stack())}).Error("Recovered a panic checking a backup block; the block counts as corrupt")
			reason, detail, err = BlockCorrupt, fmt.Sprintf("decoding it panicked: %v", r), nil
		}
	}()
	z, err := s.driver.Read(key, maxBlockFileSize)
	switch {
	case errors.Is(err, ErrNotExist):
		return 0, BlockMissing, "", nil
	case errors.Is(err, ErrInvalid):
		return 0, BlockUnreadable, err.Error(), nil
	case err != nil:
		return 0, "", "", fmt.Errorf("read block %s at offset %d: %w", ref.Checksum, ref.Offset, err)
	}
	n = int64(len(z))
	data, err := decompress(method, z, size)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, BlockTruncated, fmt.Sprintf("its %d stored bytes end in the middle of the %s stream", len(z), method), nil
	case err == nil && int64(len(data)) < size:
		return n, BlockTruncated, fmt.Sprintf("its %d stored bytes give %d of the block's %d bytes", len(z), len(data), size), nil
	case err != nil:
		return n, BlockCorrupt, fmt.Sprintf("it does not decompress (%s): %v", method, err), nil
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.Checksum {
		return n, BlockChecksumMismatch, "its content hashes to " + hex.EncodeToString(sum[:]), nil
	}
	return n, "", "", nil
}

// BlockKey is the key of one of a backup's blocks in its target (for
// tools and tests that look at, or damage, a block).
func BlockKey(info *BackupInfo, ref BlockRef) string {
	return blockKey(info.VolumeName, ref.Checksum, info.Compression)
}
