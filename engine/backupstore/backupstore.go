// Package backupstore keeps volume backups in a backup target. Layout,
// under backupstore/volumes/<volume>/:
//
//	volume.cfg                       the volume: size, last backup
//	blocks/<aa>/<bb>/<sha256>.blk    2 MiB blocks, gzip-compressed, named by
//	                                 the checksum of their content
//	backups/backup_<name>.cfg        one backup: its snapshot, labels,
//	                                 creation time and block list
//
// A backup uploads only blocks the store lacks and, given the blocks that
// changed since the snapshot of the volume's last backup, reads only
// those. A backup becomes visible when its config is written, last.
// Deleting a backup frees the blocks no other backup uses.
package backupstore

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
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
	Name              string            `json:"name"`
	VolumeName        string            `json:"volumeName"`
	VolumeSize        int64             `json:"volumeSize"`
	SnapshotName      string            `json:"snapshotName"`
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
}

// Source is the snapshot content a backup reads.
type Source interface {
	io.ReaderAt
	Size() int64
}

// BackupRequest says what to back up.
type BackupRequest struct {
	// Name of the backup; generated when empty.
	Name              string
	Volume            string
	Snapshot          string
	SnapshotCreatedAt string
	Labels            map[string]string
	Source            Source
	// Changed, when set, marks the 4 KiB blocks that changed since
	// ChangedSince, the snapshot the volume's last backup was taken from;
	// the rest is taken from that backup without reading it.
	Changed      []bool
	ChangedSince string
	// Allocated, when set, marks the 4 KiB blocks the snapshot's layers
	// hold, for a volume on a backing image: a backup block holding none
	// is left out (the image provides it), and one holding any is stored
	// even when it reads as zeros (the layers may have zeroed the image).
	Allocated []bool
	// BackingImageName and BackingImageChecksum are recorded in the backup.
	BackingImageName     string
	BackingImageChecksum string
	// Progress, when set, receives the percentage done.
	Progress func(percent int)
}

// Stats say what a backup did.
type Stats struct {
	BytesRead      int64
	BytesUploaded  int64
	BlocksUploaded int
	BlocksReused   int
}

// Store is a backup target.
type Store struct {
	target string
	driver Driver
	now    func() time.Time

	mu    sync.Mutex
	locks map[string]*sync.Mutex
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
	return NewStore(target, d), nil
}

// NewStore returns a store on a driver.
func NewStore(target string, d Driver) *Store {
	return &Store{target: target, driver: d, now: time.Now, locks: map[string]*sync.Mutex{}}
}

// volumeLock serializes backups and deletions of one volume in this
// process: a deletion's block collection must not race a backup that
// reuses blocks.
func (s *Store) volumeLock(volume string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[volume]
	if !ok {
		l = &sync.Mutex{}
		s.locks[volume] = l
	}
	return l
}

func volumeKey(volume string) string    { return "backupstore/volumes/" + volume }
func volumeCfgKey(volume string) string { return volumeKey(volume) + "/volume.cfg" }
func backupCfgKey(volume, b string) string {
	return volumeKey(volume) + "/backups/backup_" + b + ".cfg"
}
func blockKey(volume, sum string) string {
	return volumeKey(volume) + "/blocks/" + sum[:2] + "/" + sum[2:4] + "/" + sum + ".blk"
}

func (s *Store) readJSON(key string, v interface{}) error {
	data, err := s.driver.Read(key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s in the backup target is corrupt: %w", key, err)
	}
	return nil
}

func (s *Store) writeJSON(key string, v interface{}) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.driver.Write(key, data)
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

// Backup stores a snapshot and returns the backup once it is visible.
func (s *Store) Backup(req BackupRequest) (*BackupInfo, Stats, error) {
	var stats Stats
	if req.Volume == "" || req.Snapshot == "" || req.Source == nil {
		return nil, stats, errors.New("a backup needs a volume, a snapshot and its content")
	}
	lock := s.volumeLock(req.Volume)
	lock.Lock()
	defer lock.Unlock()

	size := req.Source.Size()
	vol := VolumeInfo{Name: req.Volume, Size: size, CreatedAt: s.now().UTC().Format(time.RFC3339)}
	if err := s.readJSON(volumeCfgKey(req.Volume), &vol); err != nil && !errors.Is(err, ErrNotExist) {
		return nil, stats, fmt.Errorf("read volume %s in the backup target: %w", req.Volume, err)
	}
	vol.Size = size

	// Blocks the last backup holds, reusable where nothing changed.
	previous := map[int64]string{}
	incremental := false
	if req.Changed != nil && req.ChangedSince != "" && vol.LastBackupName != "" {
		var last BackupInfo
		if err := s.readJSON(backupCfgKey(req.Volume, vol.LastBackupName), &last); err == nil && last.SnapshotName == req.ChangedSince && last.VolumeSize == size {
			incremental = true
			for _, ref := range last.Blocks {
				previous[ref.Offset] = ref.Checksum
			}
		}
	}

	name := req.Name
	if name == "" {
		name = newBackupName()
	}
	if ok, err := s.driver.Exists(backupCfgKey(req.Volume, name)); err != nil {
		return nil, stats, err
	} else if ok {
		return nil, stats, fmt.Errorf("backup %s of volume %s already exists", name, req.Volume)
	}
	info := &BackupInfo{
		Name: name, VolumeName: req.Volume, VolumeSize: size, SnapshotName: req.Snapshot,
		SnapshotCreatedAt: req.SnapshotCreatedAt, Labels: req.Labels, Compression: "gzip",
		BackingImageName: req.BackingImageName, BackingImageChecksum: req.BackingImageChecksum,
	}
	blocks := (size + BlockSize - 1) / BlockSize
	refs := make([]*BlockRef, blocks)
	// Reading stays sequential; checksums, compression and uploads run on
	// every core, which is where a backup spends its time.
	type job struct {
		index int64
		data  []byte
	}
	jobs := make(chan job)
	var (
		wg       sync.WaitGroup
		statsMu  sync.Mutex
		firstErr error
		done     int64
	)
	workers := max(1, runtime.GOMAXPROCS(0))
	free := make(chan []byte, workers+1)
	for i := 0; i < workers+1; i++ {
		free <- make([]byte, BlockSize)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				sum := sha256.Sum256(j.data)
				checksum := hex.EncodeToString(sum[:])
				uploaded, err := s.putBlock(req.Volume, checksum, j.data)
				statsMu.Lock()
				switch {
				case err != nil && firstErr == nil:
					firstErr = err
				case err == nil && uploaded > 0:
					stats.BytesUploaded += uploaded
					stats.BlocksUploaded++
				case err == nil:
					stats.BlocksReused++
				}
				if err == nil {
					refs[j.index] = &BlockRef{Offset: j.index * BlockSize, Checksum: checksum}
				}
				done++
				if req.Progress != nil {
					req.Progress(int(done * 100 / blocks))
				}
				statsMu.Unlock()
				free <- j.data[:cap(j.data)]
			}
		}()
	}
	var readErr error
	for i := int64(0); i < blocks; i++ {
		statsMu.Lock()
		failed := firstErr != nil
		statsMu.Unlock()
		if failed {
			break
		}
		off := i * BlockSize
		n := min(int64(BlockSize), size-off)
		if incremental && !changedIn(req.Changed, off, n) {
			if sum, ok := previous[off]; ok {
				refs[i] = &BlockRef{Offset: off, Checksum: sum}
				statsMu.Lock()
				stats.BlocksReused++
				statsMu.Unlock()
			}
			continue
		}
		if req.Allocated != nil && !changedIn(req.Allocated, off, n) {
			continue
		}
		data := (<-free)[:n]
		if _, err := req.Source.ReadAt(data, off); err != nil {
			readErr = fmt.Errorf("read snapshot %s at %d: %w", req.Snapshot, off, err)
			free <- data
			break
		}
		stats.BytesRead += n
		if req.Allocated == nil && isZero(data) {
			free <- data
			continue
		}
		jobs <- job{index: i, data: data}
	}
	close(jobs)
	wg.Wait()
	if readErr != nil {
		return nil, stats, readErr
	}
	if firstErr != nil {
		return nil, stats, firstErr
	}
	for i, ref := range refs {
		if ref != nil {
			info.Blocks = append(info.Blocks, *ref)
			info.Size += min(int64(BlockSize), size-int64(i)*BlockSize)
		}
	}
	info.CreatedAt = s.now().UTC().Format(time.RFC3339)
	// The backup config goes last: until it exists the backup is invisible.
	if err := s.writeJSON(backupCfgKey(req.Volume, info.Name), info); err != nil {
		return nil, stats, fmt.Errorf("write backup %s: %w", info.Name, err)
	}
	vol.LastBackupName, vol.LastBackupAt = info.Name, info.CreatedAt
	if err := s.writeJSON(volumeCfgKey(req.Volume), vol); err != nil {
		return nil, stats, fmt.Errorf("write volume %s in the backup target: %w", req.Volume, err)
	}
	if req.Progress != nil {
		req.Progress(100)
	}
	return info, stats, nil
}

func changedIn(changed []bool, off, n int64) bool {
	for b := off / smallBlock; b < (off+n+smallBlock-1)/smallBlock && b < int64(len(changed)); b++ {
		if changed[b] {
			return true
		}
	}
	return false
}

// putBlock stores a block unless the store has it; it returns the bytes
// uploaded (0 when the block was there).
func (s *Store) putBlock(volume, checksum string, data []byte) (int64, error) {
	key := blockKey(volume, checksum)
	exists, err := s.driver.Exists(key)
	if err != nil {
		return 0, fmt.Errorf("check block %s: %w", checksum, err)
	}
	if exists {
		return 0, nil
	}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if _, err := w.Write(data); err != nil {
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if err := s.driver.Write(key, z.Bytes()); err != nil {
		return 0, fmt.Errorf("upload block %s: %w", checksum, err)
	}
	return int64(z.Len()), nil
}

// Restore writes a backup into dst, which must read as zeros where the
// backup holds no data (a new volume does). Every block is verified
// against its checksum.
func (s *Store) Restore(volume, backup string, dst io.WriterAt, progress func(int)) (*BackupInfo, error) {
	info, err := s.Get(volume, backup)
	if err != nil {
		return nil, err
	}
	for i, ref := range info.Blocks {
		z, err := s.driver.Read(blockKey(volume, ref.Checksum))
		if err != nil {
			return nil, fmt.Errorf("backup %s: read block %s: %w", backup, ref.Checksum, err)
		}
		r, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil, fmt.Errorf("backup %s: block %s is corrupt: %w", backup, ref.Checksum, err)
		}
		data, err := io.ReadAll(io.LimitReader(r, BlockSize+1))
		if err != nil || len(data) > BlockSize {
			return nil, fmt.Errorf("backup %s: block %s is corrupt", backup, ref.Checksum)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.Checksum {
			return nil, fmt.Errorf("backup %s: block %s does not match its checksum", backup, ref.Checksum)
		}
		if _, err := dst.WriteAt(data, ref.Offset); err != nil {
			return nil, fmt.Errorf("backup %s: write at %d: %w", backup, ref.Offset, err)
		}
		if progress != nil {
			progress((i + 1) * 100 / len(info.Blocks))
		}
	}
	if progress != nil {
		progress(100)
	}
	return info, nil
}

// Get returns one backup.
func (s *Store) Get(volume, backup string) (*BackupInfo, error) {
	var info BackupInfo
	if err := s.readJSON(backupCfgKey(volume, backup), &info); err != nil {
		if errors.Is(err, ErrNotExist) {
			return nil, fmt.Errorf("backup %s of volume %s: %w", backup, volume, ErrNotExist)
		}
		return nil, err
	}
	return &info, nil
}

// List returns a volume's backups, oldest first.
func (s *Store) List(volume string) ([]*BackupInfo, error) {
	keys, err := s.driver.List(volumeKey(volume) + "/backups")
	if err != nil {
		return nil, err
	}
	var out []*BackupInfo
	for _, k := range keys {
		base := path.Base(k)
		if !strings.HasPrefix(base, "backup_") || !strings.HasSuffix(base, ".cfg") {
			continue
		}
		info, err := s.Get(volume, strings.TrimSuffix(strings.TrimPrefix(base, "backup_"), ".cfg"))
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Volume returns one volume's record; ErrNotExist when the store has none.
func (s *Store) Volume(name string) (*VolumeInfo, error) {
	var v VolumeInfo
	if err := s.readJSON(volumeCfgKey(name), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Volumes lists the volumes the store holds backups of.
func (s *Store) Volumes() ([]VolumeInfo, error) {
	keys, err := s.driver.List("backupstore/volumes")
	if err != nil {
		return nil, err
	}
	var out []VolumeInfo
	for _, k := range keys {
		var v VolumeInfo
		if err := s.readJSON(k+"/volume.cfg", &v); err != nil {
			if errors.Is(err, ErrNotExist) {
				continue
			}
			return nil, err
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes a backup, then the blocks no remaining backup uses.
func (s *Store) Delete(volume, backup string) error {
	lock := s.volumeLock(volume)
	lock.Lock()
	defer lock.Unlock()
	if ok, err := s.driver.Exists(backupCfgKey(volume, backup)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("backup %s of volume %s: %w", backup, volume, ErrNotExist)
	}
	if err := s.driver.Delete(backupCfgKey(volume, backup)); err != nil {
		return fmt.Errorf("delete backup %s: %w", backup, err)
	}
	remaining, err := s.List(volume)
	if err != nil {
		return err
	}
	var vol VolumeInfo
	if err := s.readJSON(volumeCfgKey(volume), &vol); err == nil && vol.LastBackupName == backup {
		vol.LastBackupName, vol.LastBackupAt = "", ""
		if n := len(remaining); n > 0 {
			vol.LastBackupName, vol.LastBackupAt = remaining[n-1].Name, remaining[n-1].CreatedAt
		}
		if err := s.writeJSON(volumeCfgKey(volume), vol); err != nil {
			return err
		}
	}
	return s.collectBlocks(volume, remaining)
}

// collectBlocks deletes the blocks none of the backups uses. A crash in
// the middle leaves unused blocks, which the next deletion collects.
func (s *Store) collectBlocks(volume string, backups []*BackupInfo) error {
	used := map[string]bool{}
	for _, b := range backups {
		for _, ref := range b.Blocks {
			used[ref.Checksum] = true
		}
	}
	level1, err := s.driver.List(volumeKey(volume) + "/blocks")
	if err != nil {
		return err
	}
	for _, d1 := range level1 {
		level2, err := s.driver.List(d1)
		if err != nil {
			return err
		}
		for _, d2 := range level2 {
			files, err := s.driver.List(d2)
			if err != nil {
				return err
			}
			for _, f := range files {
				if !used[strings.TrimSuffix(path.Base(f), ".blk")] {
					if err := s.driver.Delete(f); err != nil {
						return fmt.Errorf("free block %s: %w", f, err)
					}
				}
			}
		}
	}
	return nil
}
