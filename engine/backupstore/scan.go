package backupstore

import (
	"errors"
	"path"
	"sort"
	"sync"
)

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
	summaries.keepVolumes(s.readsKey, keys)
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

// VolumeListing is what a target holds of one volume: its record, its
// backups (without block lists; shared, not to be changed), and the
// records of it that cannot be used.
type VolumeListing struct {
	Volume        VolumeInfo
	Backups       []*BackupInfo
	Invalid       []InvalidRecord
	RecordMissing bool
}

// ScanVolume reads one volume as Scan does, for a refresh of that volume
// alone (a backup or a deletion just made). It returns nil, nil when the
// target holds nothing of the volume.
func (s *Store) ScanVolume(name string) (*VolumeListing, error) {
	if err := checkName("volume", name); err != nil {
		return nil, err
	}
	r := s.scanVolume(name)
	switch {
	case r == nil:
		return nil, nil
	case r.err != nil:
		return nil, r.err
	}
	l := &VolumeListing{Backups: r.backups, Invalid: r.invalid, RecordMissing: r.recordMissing}
	if r.volume != nil {
		l.Volume = *r.volume
	} else {
		l.Volume = VolumeInfo{Name: name}
	}
	return l, nil
}

// ForgetRecord makes the next scan of a volume read its record, as a
// refresh a user asks for does: a record changed by hand is seen at once.
func (s *Store) ForgetRecord(volume string) { summaries.forgetRecord(s.readsKey, volume) }

// scanVolume reads one volume's backups listing, the configs of backups
// it has not read before, and the volume's record when the backups
// listed are not those it last read the record with (a backup or a
// deletion writes the record), or read more than recordMaxAge ago. A
// poll of a volume where nothing changed is then one request. A missing record does not hide the backups: a
// listing that left them out would have them taken for deleted.
func (s *Store) scanVolume(name string) *volumeScan {
	if checkName("volume", name) != nil {
		return nil // not a folder this store writes
	}
	r := &volumeScan{name: name}
	names, err := s.backupNames(name)
	if err != nil {
		return &volumeScan{err: err}
	}
	summaries.prune(s.readsKey, name, names)
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

	listed := listedKey(names)
	v, cached := summaries.record(s.readsKey, name, listed, s.now())
	if !cached {
		v, err = s.Volume(name)
		switch {
		case errors.Is(err, ErrNotExist):
			v, r.recordMissing = nil, true
		case errors.Is(err, ErrInvalid):
			v = nil
			r.invalid = append(r.invalid, InvalidRecord{Volume: name, Err: err})
		case err != nil:
			return &volumeScan{err: err}
		case recordCurrent(v, r.backups):
			summaries.putRecord(s.readsKey, name, listed, v, s.now())
		}
	}
	r.volume = v
	if r.recordMissing {
		if len(names) == 0 {
			return nil
		}
		v := volumeFromBackups(name, r.backups)
		r.volume = &v
	}
	return r
}

// recordCurrent reports whether a volume record read names the newest
// backup listed as the volume's last. A backup writes its config, then
// the record: a record read between the two is not kept, and is read
// again at the next poll.
func recordCurrent(v *VolumeInfo, backups []*BackupInfo) bool {
	if n := len(backups); n > 0 {
		return v.LastBackupName == backups[n-1].Name
	}
	return v.LastBackupName == ""
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
