package backup

import (
	"fmt"
	"sort"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// Two targets whose URLs name one place (backupstore.TargetLocation: one
// folder, one bucket and prefix, however written) would each mirror the
// other's backups as their own, and a BackupVolume deleted in one would
// delete the backups the other's objects stand for. The API refuses such
// a URL; a BackupTarget written with kubectl, or the backup-target
// setting, is not asked. So here the first target made at a place holds
// it, and any other is refused: not read, nothing deleted through it,
// its Unavailable condition naming the holder.

// placedTarget is a target and where it keeps its backups.
type placedTarget struct {
	target   datastore.Target
	location string
}

// locationHolder is the target that holds the place name keeps its
// backups in, when it is another: of the targets at one place, the one
// made first, by name when made at once (datastore.HoldsFirst, as
// TargetForURL picks). Nil when name holds it, or shares it with none.
func locationHolder(name string, targets []placedTarget) *placedTarget {
	var self *placedTarget
	for i := range targets {
		if targets[i].target.Name == name {
			self = &targets[i]
		}
	}
	if self == nil || self.location == "" {
		return nil
	}
	var at []*placedTarget
	for i := range targets {
		if targets[i].location == self.location {
			at = append(at, &targets[i])
		}
	}
	sort.Slice(at, func(i, j int) bool { return datastore.HoldsFirst(at[i].target, at[j].target) })
	if at[0] == self {
		return nil
	}
	return at[0]
}

// placedTargets are every target with its place. A URL whose place
// cannot be told has none: it cannot be opened either.
func (c *TargetController) placedTargets() ([]placedTarget, error) {
	targets, err := c.ds.ListTargets()
	if err != nil {
		return nil, err
	}
	out := make([]placedTarget, 0, len(targets))
	for _, t := range targets {
		p := placedTarget{target: t}
		p.location, _ = backupstore.TargetLocation(t.URL)
		out = append(out, p)
	}
	return out, nil
}

// sharedLocationError is why a target at another's place is refused.
func sharedLocationError(holder *placedTarget) error {
	return fmt.Errorf("refused: it keeps its backups where backup target %s does (%s), which was there first; two targets may not share a place, so this one is not read and nothing is deleted through it: give one of them another URL",
		holder.target.Name, holder.target.URL)
}

// othersAt are the targets but name at name's place.
func othersAt(name string, targets []placedTarget) []string {
	var self placedTarget
	for _, p := range targets {
		if p.target.Name == name {
			self = p
		}
	}
	var out []string
	for _, p := range targets {
		if p.target.Name != name && self.location != "" && p.location == self.location {
			out = append(out, p.target.Name)
		}
	}
	return out
}

// otherOwner names an object of another target at the world's place that
// stands for backups of volume and is not being deleted ("" when none):
// a BackupVolume or a Backup, as "BackupVolume <name> of backup target
// <target>". Deleting the volume from the place would delete the backups
// it stands for, which no user asked.
func (c *TargetController) otherOwner(w *world, volume string) (string, error) {
	placed, err := c.placedTargets()
	if err != nil {
		return "", err
	}
	for _, other := range othersAt(w.target, placed) {
		bv, err := c.ds.FindBackupVolumeRO(other, volume)
		if err != nil {
			return "", err
		}
		if bv != nil && bv.DeletionTimestamp == nil {
			return "BackupVolume " + bv.Name + " of backup target " + other, nil
		}
		for _, b := range w.backups {
			if datastore.BackupTargetOf(b) == other && backupVolumeOf(b) == volume && b.DeletionTimestamp == nil {
				return "Backup " + b.Name + " of backup target " + other, nil
			}
		}
	}
	return "", nil
}
