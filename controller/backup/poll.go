package backup

import (
	"context"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// lastPoll is the last poll of the whole target: of which target, with
// which credential Secret, when.
type lastPoll struct {
	target, secret string
	at             time.Time
}

// pollDecision is whether a poll of the whole target is due now, and how
// long until the next one (0: none until a setting changes).
type pollDecision struct {
	due  bool
	next time.Duration
}

// decidePoll times the polls of the whole target: one at start and when
// the target or its credential Secret changes, then one each interval.
// An interval of 0 turns polling off, at start too. A change of the
// interval times the next poll from the last.
func decidePoll(last lastPoll, target, secret string, interval time.Duration, now time.Time) pollDecision {
	switch {
	case target == "" || interval <= 0:
		return pollDecision{}
	case last.at.IsZero() || last.target != target || last.secret != secret:
		return pollDecision{due: true, next: interval}
	}
	if wait := last.at.Add(interval).Sub(now); wait > 0 {
		return pollDecision{next: wait}
	}
	return pollDecision{due: true, next: interval}
}

// syncPoll polls the whole target when a poll is due, and brings the key
// back when the next one is.
func (c *TargetController) syncPoll(ctx context.Context, t datastore.Target) (kit.Result, error) {
	c.mu.Lock()
	last := c.lastPoll[t.Name]
	c.mu.Unlock()
	now := c.now()
	d := decidePoll(last, t.URL, t.CredentialSecret, t.PollInterval, now)
	if !d.due {
		if t.URL == "" || t.PollInterval <= 0 {
			c.notPolling(t.Name)
		}
		if t.URL == "" {
			c.recordOnTarget(ctx, t.Name, t.URL, nil, now)
		}
		return kit.Result{RequeueAfter: d.next}, nil
	}
	c.mu.Lock()
	c.lastPoll[t.Name] = lastPoll{target: t.URL, secret: t.CredentialSecret, at: now}
	c.mu.Unlock()

	err := c.pollTarget(ctx, t)
	c.polled(t.Name, t.URL, !isTargetError(err), now)
	var targetErr error
	if isTargetError(err) {
		targetErr = err
	}
	c.recordOnTarget(ctx, t.Name, t.URL, targetErr, now)
	if isTargetError(err) {
		// Said on the BackupVolumes and in an event; the next poll
		// tries again, not a backoff of retries that would read the
		// target more often than polls do.
		c.reportIfUnavailable(ctx, t.Name, err)
		c.Logger.WithError(err).WithFields(logrus.Fields{"backupTarget": t.Name, "target": t.URL}).Warn("Backup target poll failed; the next poll tries again")
		return kit.Result{RequeueAfter: d.next}, nil
	}
	return kit.Result{RequeueAfter: d.next}, err
}

// pollTarget reads the whole target and brings every volume's objects in
// line with it. What engines report is mirrored even when the target
// cannot be read (a backup failing for that reason shows its error), but
// nothing is forgotten then: an unreachable target must not empty the
// lists.
func (c *TargetController) pollTarget(ctx context.Context, t datastore.Target) error {
	store, err := c.openTarget(ctx, t)
	if err != nil || store == nil {
		return err
	}
	w, err := c.loadWorld(t)
	if err != nil {
		return err
	}
	deleteErr := c.finishDeletions(ctx, store, w.deleting("", true))
	listing, scanErr := store.Scan()
	if scanErr != nil {
		if err := c.mirrorEngines(ctx, w, ""); err != nil {
			return err
		}
		return &targetError{scanErr}
	}
	byVolume := splitListing(listing)
	for _, vol := range w.volumes(byVolume) {
		if err := c.syncVolume(ctx, store, w, vol, byVolume[vol]); err != nil {
			// A write refused (a conflict with the cache behind): that
			// volume is refreshed again alone, with backoff, rather than
			// the whole target read again.
			c.Logger.WithError(err).WithFields(logrus.Fields{"backupTarget": t.Name, "backupVolume": vol}).Warn("Could not bring the backup volume's objects in line with the poll; refreshing it again")
			c.Queue.AddRateLimited(c.refreshKeyIn(t.Name, vol))
		}
	}
	c.Logger.WithFields(logrus.Fields{"backupTarget": t.Name, "target": t.URL, "volumes": len(byVolume)}).Debug("Polled the backup target")
	return deleteErr
}

// splitListing is a listing of the whole target by volume, as
// ScanVolume would give each.
func splitListing(l *backupstore.Listing) map[string]*backupstore.VolumeListing {
	out := map[string]*backupstore.VolumeListing{}
	get := func(volume string) *backupstore.VolumeListing {
		if out[volume] == nil {
			out[volume] = &backupstore.VolumeListing{Volume: backupstore.VolumeInfo{Name: volume}}
		}
		return out[volume]
	}
	for _, v := range l.Volumes {
		get(v.Name).Volume = v
	}
	for _, bad := range l.Invalid {
		vl := get(bad.Volume)
		vl.Invalid = append(vl.Invalid, bad)
	}
	for _, v := range l.RecordMissing {
		get(v).RecordMissing = true
	}
	for v, list := range l.Backups {
		get(v).Backups = list
	}
	return out
}

// volumes are every volume a poll syncs, sorted: those the target holds
// and those objects or engines name.
func (w *world) volumes(listed map[string]*backupstore.VolumeListing) []string {
	set := map[string]bool{}
	for v := range listed {
		set[v] = true
	}
	for _, b := range w.backups {
		if v := backupVolumeOf(b); v != "" && w.inTarget(b) {
			set[v] = true
		}
	}
	for name := range w.backupVolumes {
		set[name] = true
	}
	for v := range w.engineBackups {
		set[v] = true
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
