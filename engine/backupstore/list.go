package backupstore

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// Get returns one backup, checked (see validate.go).
func (s *Store) Get(volume, backup string) (*BackupInfo, error) {
	if err := checkNames(volume, backup); err != nil {
		return nil, err
	}
	data, err := s.driver.Read(backupCfgKey(volume, backup), maxBackupConfigSize)
	if errors.Is(err, ErrNotExist) {
		return nil, fmt.Errorf("backup %s of volume %s: %w", backup, volume, ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read backup %s of volume %s: %w", backup, volume, err)
	}
	return decodeBackup(data, volume, backup)
}

// backupNames lists the names of a volume's backup configs.
func (s *Store) backupNames(volume string) ([]string, error) {
	keys, err := s.driver.List(volumeKey(volume) + "/backups")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, k := range keys {
		base := path.Base(k)
		if strings.HasPrefix(base, "backup_") && strings.HasSuffix(base, ".cfg") {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(base, "backup_"), ".cfg"))
		}
	}
	return names, nil
}

// List returns a volume's backups, oldest first. It fails if any backup
// config cannot be used: a deletion must know every block in use.
func (s *Store) List(volume string) ([]*BackupInfo, error) {
	if err := checkName("volume", volume); err != nil {
		return nil, err
	}
	names, err := s.backupNames(volume)
	if err != nil {
		return nil, err
	}
	var out []*BackupInfo
	for _, name := range names {
		info, err := s.Get(volume, name)
		if errors.Is(err, ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sortBackups(out)
	return out, nil
}

// sortBackups orders backups by creation time, then name.
func sortBackups(list []*BackupInfo) {
	at := func(b *BackupInfo) time.Time {
		t, _ := time.Parse(time.RFC3339Nano, b.CreatedAt)
		return t
	}
	sort.Slice(list, func(i, j int) bool {
		if ti, tj := at(list[i]), at(list[j]); !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return list[i].Name < list[j].Name
	})
}

// Volume returns one volume's record; ErrNotExist when the store has none.
func (s *Store) Volume(name string) (*VolumeInfo, error) {
	if err := checkName("volume", name); err != nil {
		return nil, err
	}
	data, err := s.driver.Read(volumeCfgKey(name), maxRecordSize)
	if err != nil {
		return nil, err
	}
	return decodeVolume(data, name)
}

// Listing is what a target holds: the volumes and backups that can be
// used, and the records that cannot, with why.
type Listing struct {
	Volumes []VolumeInfo
	// Backups by volume, without their block lists; shared, not to be
	// changed.
	Backups map[string][]*BackupInfo
	Invalid []InvalidRecord
	// RecordMissing names the volumes whose folder holds backups but no
	// volume.cfg (removed by hand, by a lifecycle rule or a partial copy,
	// or not yet written by a first backup finishing). Their backups are
	// listed all the same, and their entry in Volumes is made from them.
	RecordMissing []string
}

// InvalidRecord is a volume record (Backup empty) or a backup config in
// the target that breaks a rule or cannot be parsed.
type InvalidRecord struct {
	Volume, Backup string
	Err            error
}

// Scan reads the whole target. A record that cannot be used is reported
// in Invalid and the rest is read; only a failure to reach the target
// fails the scan. The backups it lists carry no block list.
func (s *Store) Scan() (*Listing, error) {
	keys, err := s.driver.List("backupstore/volumes")
	if err != nil {
		return nil, err
	}
	// Volumes are read scanWorkers at a time: on an object store each
	// read is a round trip.
	results := make([]*volumeScan, len(keys))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(scanWorkers, len(keys)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = s.scanVolume(path.Base(keys[i]))
			}
		}()
	}
	for i := range keys {
		work <- i
	}
	close(work)
	wg.Wait()

	l := &Listing{Backups: map[string][]*BackupInfo{}}
	for _, r := range results {
		switch {
		case r == nil:
		case r.err != nil:
			return nil, r.err
		default:
			if r.volume != nil {
				l.Volumes = append(l.Volumes, *r.volume)
			}
			if r.backups != nil {
				l.Backups[r.name] = r.backups
			}
			if r.recordMissing {
				l.RecordMissing = append(l.RecordMissing, r.name)
			}
			l.Invalid = append(l.Invalid, r.invalid...)
		}
	}
	sort.Slice(l.Volumes, func(i, j int) bool { return l.Volumes[i].Name < l.Volumes[j].Name })
	sort.Strings(l.RecordMissing)
	summaries.keepVolumes(s.target, keys)
	return l, nil
}

// scanWorkers is how many volumes Scan reads at once.
const scanWorkers = 8

// volumeScan is what Scan read of one volume; nil when the folder is not
// a volume's, or holds no backup config at all (a first backup in
// progress, or an empty folder).
type volumeScan struct {
	name          string
	volume        *VolumeInfo
	backups       []*BackupInfo
	invalid       []InvalidRecord
	recordMissing bool
	err           error
}

// scanVolume reads one volume's record and backups. A missing record
// does not hide the backups: a listing that left them out would have
// them taken for deleted.
func (s *Store) scanVolume(name string) *volumeScan {
	if checkName("volume", name) != nil {
		return nil // not a folder this store writes
	}
	r := &volumeScan{name: name}
	v, err := s.Volume(name)
	switch {
	case errors.Is(err, ErrNotExist):
		r.recordMissing = true
	case errors.Is(err, ErrInvalid):
		r.invalid = append(r.invalid, InvalidRecord{Volume: name, Err: err})
	case err != nil:
		return &volumeScan{err: err}
	default:
		r.volume = v
	}
	names, err := s.backupNames(name)
	if err != nil {
		return &volumeScan{err: err}
	}
	summaries.prune(s.target, name, names)
	for _, b := range names {
		info, err := s.summary(name, b)
		switch {
		case errors.Is(err, ErrNotExist):
		case errors.Is(err, ErrInvalid):
			r.invalid = append(r.invalid, InvalidRecord{Volume: name, Backup: b, Err: err})
		case err != nil:
			return &volumeScan{err: err}
		default:
			r.backups = append(r.backups, info)
		}
	}
	sortBackups(r.backups)
	if r.recordMissing {
		if len(names) == 0 {
			return nil
		}
		v := volumeFromBackups(name, r.backups)
		r.volume = &v
	}
	return r
}

// volumeFromBackups stands in for a missing volume record: the volume's
// size as of its newest backup, created with its oldest.
func volumeFromBackups(name string, backups []*BackupInfo) VolumeInfo {
	v := VolumeInfo{Name: name}
	if n := len(backups); n > 0 {
		oldest, newest := backups[0], backups[n-1]
		v.Size, v.CreatedAt = newest.VolumeSize, oldest.CreatedAt
		v.LastBackupName, v.LastBackupAt = newest.Name, newest.CreatedAt
	}
	return v
}

// summaries remember the backups Scan read, without their block lists, by
// target, volume and name. A backup config is written once and never
// changed, so a poll of a target reads only the configs it has not seen:
// two requests per volume instead of one per backup.
var summaries = summaryCache{m: map[string]map[string]map[string]*BackupInfo{}}

type summaryCache struct {
	sync.Mutex
	m map[string]map[string]map[string]*BackupInfo // target, volume, backup
}

func (c *summaryCache) get(target, volume, backup string) *BackupInfo {
	c.Lock()
	defer c.Unlock()
	return c.m[target][volume][backup]
}

func (c *summaryCache) put(target, volume, backup string, info *BackupInfo) {
	c.Lock()
	defer c.Unlock()
	if c.m[target] == nil {
		c.m[target] = map[string]map[string]*BackupInfo{}
	}
	if c.m[target][volume] == nil {
		c.m[target][volume] = map[string]*BackupInfo{}
	}
	c.m[target][volume][backup] = info
}

// prune forgets a volume's backups that are no longer listed.
func (c *summaryCache) prune(target, volume string, listed []string) {
	c.Lock()
	defer c.Unlock()
	keep := map[string]bool{}
	for _, n := range listed {
		keep[n] = true
	}
	for n := range c.m[target][volume] {
		if !keep[n] {
			delete(c.m[target][volume], n)
		}
	}
}

// keepVolumes forgets the volumes of a target that are no longer listed.
func (c *summaryCache) keepVolumes(target string, keys []string) {
	c.Lock()
	defer c.Unlock()
	keep := map[string]bool{}
	for _, k := range keys {
		keep[path.Base(k)] = true
	}
	for v := range c.m[target] {
		if !keep[v] {
			delete(c.m[target], v)
		}
	}
}

// summary is a backup without its block list, from the cache or read.
func (s *Store) summary(volume, backup string) (*BackupInfo, error) {
	if info := summaries.get(s.target, volume, backup); info != nil {
		return info, nil
	}
	info, err := s.Get(volume, backup)
	if err != nil {
		return nil, err
	}
	sum := *info
	sum.Blocks = nil
	summaries.put(s.target, volume, backup, &sum)
	return &sum, nil
}
