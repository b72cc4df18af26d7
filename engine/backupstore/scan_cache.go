package backupstore

import (
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// summaries remember the backups Scan read, without their block lists, by
// target, volume and name, and the volume records it read. A backup
// config is written once and never changed, so a poll of a target reads
// only the configs it has not seen, and a volume's record only when its
// backups listing changed: one request per volume where nothing changed.
var summaries = summaryCache{m: map[string]map[string]map[string]*BackupInfo{}, records: map[string]map[string]volumeRecord{}}

type summaryCache struct {
	sync.Mutex
	m       map[string]map[string]map[string]*BackupInfo // target, volume, backup
	records map[string]map[string]volumeRecord           // target, volume
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
	for v := range c.records[target] {
		if !keep[v] {
			delete(c.records[target], v)
		}
	}
}

// summary is a backup without its block list, from the cache or read.
func (s *Store) summary(volume, backup string) (*BackupInfo, error) {
	if info := summaries.get(s.readsKey, volume, backup); info != nil {
		return info, nil
	}
	info, err := s.Get(volume, backup)
	if err != nil {
		return nil, err
	}
	sum := *info
	sum.Blocks = nil
	summaries.put(s.readsKey, volume, backup, &sum)
	return &sum, nil
}

// listedKey is a volume's backups listing as one string (names sorted).
func listedKey(names []string) string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return strings.Join(sorted, "\n")
}

// recordMaxAge is how long a volume record read is used while the
// volume's backups listing stays the same. Only a backup or a deletion
// writes the record, and each changes the listing, so the record is read
// again then; a record changed or removed by hand with no backup added
// or deleted is seen within this time (or at once by ForgetRecord). At
// the default poll interval (300 s) it adds a twelfth of a request per
// volume to a poll.
const recordMaxAge = time.Hour

// record returns the volume record read when the volume's backups
// listing was listed, and whether there is one not older than
// recordMaxAge at now.
func (c *summaryCache) record(target, volume, listed string, now time.Time) (*VolumeInfo, bool) {
	c.Lock()
	defer c.Unlock()
	r, ok := c.records[target][volume]
	if !ok || r.listed != listed || now.Sub(r.at) > recordMaxAge {
		return nil, false
	}
	return r.info, true
}

func (c *summaryCache) putRecord(target, volume, listed string, info *VolumeInfo, at time.Time) {
	c.Lock()
	defer c.Unlock()
	if c.records[target] == nil {
		c.records[target] = map[string]volumeRecord{}
	}
	c.records[target][volume] = volumeRecord{listed: listed, info: info, at: at}
}

func (c *summaryCache) forgetRecord(target, volume string) {
	c.Lock()
	defer c.Unlock()
	delete(c.records[target], volume)
}

// volumeRecord is a volume record, the backups listing it was read with,
// and when it was read.
type volumeRecord struct {
	listed string
	info   *VolumeInfo
	at     time.Time
}
