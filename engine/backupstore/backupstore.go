// Package backupstore keeps volume backups in a backup target. Layout,
// under backupstore/volumes/<volume>/:
//
//	volume.cfg                       the volume: size, last backup
//	blocks/<aa>/<bb>/<sha256>.blk    2 MiB blocks, gzip-compressed, named by
//	                                 the checksum of their content
//	backups/backup_<name>.cfg        one backup: its snapshot, labels,
//	                                 creation time and block list
//	.staging/                        file:// only: blocks of running
//	                                 backups not yet durable (batch.go)
//
// A backup uploads only blocks the store lacks and, given the blocks that
// changed since the snapshot of the volume's last backup, reads only
// those. A backup becomes visible when its config is written, last.
// Deleting a backup frees the blocks no other backup uses.
package backupstore

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"
)

// BlockSize is the unit of backup storage and deduplication.
const BlockSize = 2 << 20

// smallBlock is the unit of the change map a replica reports.
const smallBlock = 4096

// VolumeInfo is a volume's record in the store.
type VolumeInfo struct {
	Name           string `json:"name"`
	Size           int64  `json:"size"`
	CreatedAt      string `json:"createdAt"`
	LastBackupName string `json:"lastBackupName"`
	LastBackupAt   string `json:"lastBackupAt"`
}

// BlockRef is one stored block of a backup.
type BlockRef struct {
	Offset   int64  `json:"offset"`
	Checksum string `json:"checksum"`
}

// BackupInfo is one backup.
type BackupInfo struct {
	Name         string `json:"name"`
	VolumeName   string `json:"volumeName"`
	VolumeSize   int64  `json:"volumeSize"`
	SnapshotName string `json:"snapshotName"`
	// SnapshotID is the identity of the snapshot backed up (a name may be
	// reused after a purge, an ID may not): the next backup is
	// incremental only on this very snapshot. Empty in older backups.
	SnapshotID        string            `json:"snapshotID,omitempty"`
	SnapshotCreatedAt string            `json:"snapshotCreatedAt"`
	CreatedAt         string            `json:"createdAt"`
	Labels            map[string]string `json:"labels"`
	Compression       string            `json:"compression"`
	Blocks            []BlockRef        `json:"blocks"`
	// BackingImageName and BackingImageChecksum name the backing image the
	// volume started from. The backup holds only what the volume's layers
	// hold; a restore reads the rest from the same image.
	BackingImageName     string `json:"backingImageName,omitempty"`
	BackingImageChecksum string `json:"backingImageChecksum,omitempty"`
	// Size is the bytes of data the backup holds (stored blocks, before
	// compression).
	Size int64 `json:"size"`
	// Mode is what the backup was: "full" when it uploaded every block it
	// holds, present in the target or not (asked for, or a first backup
	// that found none of its blocks there), "incremental" when it took
	// what was there. Empty in older backups (read as incremental).
	Mode string `json:"backupMode,omitempty"`
	// NewlyUploaded and ReUploaded are the bytes (as stored) of the blocks
	// the backup uploaded that the target did not hold, and of those it
	// held and a full backup uploaded again.
	NewlyUploaded int64 `json:"newlyUploadedDataSize,omitempty"`
	ReUploaded    int64 `json:"reUploadedDataSize,omitempty"`
	// SnapshotDigest is the digest of the snapshot as backed up (see
	// digest.go); empty in older backups.
	SnapshotDigest string `json:"snapshotDigest,omitempty"`
}

// The backup modes, as Longhorn names them.
const (
	ModeFull        = "full"
	ModeIncremental = "incremental"
)

// CheckMode refuses a backup mode other than full, incremental or empty
// (incremental).
func CheckMode(mode string) error {
	switch mode {
	case "", ModeFull, ModeIncremental:
		return nil
	}
	return fmt.Errorf("backupMode %q: must be %q or %q", mode, ModeFull, ModeIncremental)
}

// Source is the snapshot content a backup reads.
type Source interface {
	io.ReaderAt
	Size() int64
}

// BackupRequest says what to back up.
type BackupRequest struct {
	// Name of the backup; generated when empty.
	Name string
	// Full stores every block the snapshot holds, uploading again those
	// the target has (a block that rotted there is then whole again for
	// this backup and every later one), and takes nothing from the
	// volume's last backup.
	Full              bool
	Volume            string
	Snapshot          string
	SnapshotID        string
	SnapshotCreatedAt string
	Labels            map[string]string
	Source            Source
	// Changed, when set, marks the 4 KiB blocks that changed since the
	// snapshot the volume's last backup was taken from, named
	// ChangedSince with the ID ChangedSinceID; the rest is taken from that
	// backup without reading it. Unless the last backup records that very
	// snapshot (name and ID), the backup reads everything.
	Changed        []bool
	ChangedSince   string
	ChangedSinceID string
	// ChangedSinceLast, when set and Changed is not, is asked for the
	// change map under the volume's lock, given the volume's last backup
	// (read once, by the backup itself): it returns the 4 KiB blocks
	// changed since the snapshot with last.SnapshotID, or nil for a full
	// backup. It is not asked when that backup cannot be the base (no
	// SnapshotID, another size or compression).
	ChangedSinceLast func(last *BackupInfo) []bool
	// Allocated, when set, marks the 4 KiB blocks the snapshot's layers
	// hold, for a volume on a backing image: a backup block holding none
	// is left out (the image provides it), and one holding any is stored
	// even when it reads as zeros (the layers may have zeroed the image).
	Allocated []bool
	// BackingImageName and BackingImageChecksum are recorded in the backup.
	BackingImageName     string
	BackingImageChecksum string
	// Compression is how blocks are stored: lz4 (the default when
	// empty), gzip or none.
	Compression string
	// Concurrency is how many blocks are compressed and uploaded at once
	// (DefaultConcurrency when 0).
	Concurrency int
	// Progress, when set, receives the percentage done.
	Progress func(percent int)
}

// DefaultConcurrency is Longhorn's default backup-concurrent-limit.
const DefaultConcurrency = 2

// Stats say what a backup did.
type Stats struct {
	BytesRead      int64
	BytesUploaded  int64
	BlocksUploaded int
	BlocksReused   int
	// BlocksInTarget are those of BlocksReused the target held when the
	// backup found them, and it did not upload (the others were
	// unchanged since the last backup, or repeat a block of the same
	// snapshot). A backup with any is not full.
	BlocksInTarget int
	// BytesReUploaded are those of BytesUploaded a full backup uploaded
	// again though the target had them.
	BytesReUploaded int64
}

// Store is a backup target. Any number of Stores, in this process or in
// managers on other nodes, may work on one target at once: operations on
// a volume coordinate through locks kept in the target (see lock.go).
type Store struct {
	target string
	driver Driver
	now    func() time.Time
	// readsKey names the store in what Scan remembers (scan_cache.go):
	// the target, and the server an s3:// target's credential names, as
	// two servers may have the same bucket and path.
	readsKey string

	// compression and concurrency are what a backup request that leaves
	// them empty uses (SetBackupDefaults).
	compression string
	concurrency int

	// Lock timing; tests shorten it.
	lockRefresh, lockExpiry, lockPoll time.Duration
}

// SetBackupDefaults sets how the store's backups compress blocks (lz4,
// gzip or none; lz4 when empty) and how many blocks each compresses and
// uploads at once (DefaultConcurrency when 0), unless a request says.
func (s *Store) SetBackupDefaults(compression string, concurrency int) error {
	if compression == "" {
		compression = DefaultCompression
	}
	if err := CheckCompression(compression); err != nil {
		return fmt.Errorf("backup-compression-method: %w", err)
	}
	if concurrency < 0 || concurrency > 64 {
		return fmt.Errorf("backup-concurrent-limit: %d must be between 1 and 64", concurrency)
	}
	if concurrency == 0 {
		concurrency = DefaultConcurrency
	}
	s.compression, s.concurrency = compression, concurrency
	return nil
}

// Open returns the store of a backup-target URL that needs no credential
// (file:///path).
func Open(target string) (*Store, error) {
	return OpenWithCredential(target, nil)
}

// OpenWithCredential returns the store of a backup-target URL (file:///path
// or s3://<bucket>@<region>/<path>), with cred the data of the
// backup-target-credential-secret (nil when none is set).
func OpenWithCredential(target string, cred map[string]string) (*Store, error) {
	d, err := NewDriver(target, cred)
	if err != nil {
		return nil, err
	}
	s := NewStore(target, d)
	if endpoint := cred["AWS_ENDPOINTS"]; endpoint != "" {
		s.readsKey = target + " at " + endpoint
	}
	return s, nil
}

// NewStore returns a store on a driver.
func NewStore(target string, d Driver) *Store {
	return &Store{target: target, readsKey: target, driver: d, now: time.Now, compression: DefaultCompression, concurrency: DefaultConcurrency,
		lockRefresh: defaultLockRefresh, lockExpiry: defaultLockExpiry, lockPoll: defaultLockPoll}
}

func volumeKey(volume string) string    { return "backupstore/volumes/" + volume }
func volumeCfgKey(volume string) string { return volumeKey(volume) + "/volume.cfg" }
func backupCfgKey(volume, b string) string {
	return volumeKey(volume) + "/backups/backup_" + b + ".cfg"
}

func (s *Store) writeJSON(key string, v any) error { return writeJSONTo(s.driver, key, v) }

func writeJSONTo(d Driver, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return d.Write(key, data)
}

// URL is the backup's URL: the target with the backup and volume named in
// the query, as Longhorn writes it.
func (s *Store) URL(volume, backup string) string {
	return s.target + "?backup=" + url.QueryEscape(backup) + "&volume=" + url.QueryEscape(volume)
}

// ParseURL splits a backup URL into its target, volume and backup.
func ParseURL(backupURL string) (target, volume, backup string, err error) {
	u, err := url.Parse(backupURL)
	if err != nil {
		return "", "", "", fmt.Errorf("backup URL %q: %v", backupURL, err)
	}
	q := u.Query()
	volume, backup = q.Get("volume"), q.Get("backup")
	if volume == "" || backup == "" {
		return "", "", "", fmt.Errorf("backup URL %q must name ?backup=...&volume=...", backupURL)
	}
	if err := checkNames(volume, backup); err != nil {
		return "", "", "", fmt.Errorf("backup URL %q: %w", backupURL, err)
	}
	u.RawQuery = ""
	return u.String(), volume, backup, nil
}

// NewBackupName returns a fresh backup name, backup-<16 hex digits>.
func NewBackupName() string { return newBackupName() }

func newBackupName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "backup-" + hex.EncodeToString(b[:])
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
