package volume

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A restore runs beside its volume's syncs, not in one: a restore of a
// large volume, or from a target that stalls, takes as long as it takes,
// and the volume meanwhile reports its progress and may be deleted.
// restores holds the runs of this node, by volume.
type restores struct {
	mu   sync.Mutex
	runs map[string]*restoreRun
}

type restoreRun struct {
	backup string // the fromBackup URL restored
	cancel context.CancelFunc
	done   chan struct{} // closed when the run ends, err then set
	err    error
	// A run that failed stays, with its error, until its retry is due
	// (failureBackoff after attempts failed runs): a backup that cannot be
	// restored is not read again and again from its target, and the
	// volume's status, unchanged meanwhile, is not written again.
	failed   bool
	attempts int
	retryAt  time.Time
}

// restoreProgressInterval is how often a volume being restored syncs to
// show its progress.
const restoreProgressInterval = 3 * time.Second

// syncRestore starts the volume's restore, or tells of the one running:
// running while it does. A run that ended well is taken out (nil: the
// volume holds the backup); a failed one's error is returned until its
// retry is due, 2 s after the first failure, doubling up to 5 min, and
// the sync then starts the restore again.
func (c *Controller) syncRestore(v *longhorn.Volume, dirs []instance.ReplicaDir) (running bool, err error) {
	c.restores.mu.Lock()
	defer c.restores.mu.Unlock()
	if c.restores.runs == nil {
		c.restores.runs = map[string]*restoreRun{}
	}
	r := c.restores.runs[v.Name]
	if r != nil && r.backup != v.Spec.FromBackup {
		// The volume was deleted and made again from another backup before
		// the old run was taken out: it is not this volume's.
		r.cancel()
		delete(c.restores.runs, v.Name)
		r = nil
	}
	attempts := 0
	if r != nil && r.failed {
		if wait := r.retryAt.Sub(c.clock.Now()); wait > 0 {
			c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, wait)
			return false, r.err
		}
		attempts, r = r.attempts, nil
	}
	if r == nil {
		ctx, cancel := context.WithCancel(context.Background())
		r = &restoreRun{backup: v.Spec.FromBackup, cancel: cancel, done: make(chan struct{}), attempts: attempts}
		c.restores.runs[v.Name] = r
		v, dirs := v.DeepCopy(), slices.Clone(dirs)
		go func() {
			r.err = func() (err error) {
				// A panic outside the engine's own guard (opening the
				// target, say) is the restore's error too, not the node's.
				defer panics.Recover(c.Logger.WithFields(logrus.Fields{"volume": v.Name, "fromBackup": v.Spec.FromBackup}), &err)
				return c.restore(ctx, v, dirs)
			}()
			cancel()
			close(r.done)
			// After done, so the sync this brings sees the end.
			c.EnqueueVolume(v.Name)
		}()
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "fromBackup": v.Spec.FromBackup}).Info("Started the volume's restore")
		return true, nil
	}
	select {
	case <-r.done:
		if r.err == nil {
			delete(c.restores.runs, v.Name)
			return false, nil
		}
		r.failed, r.attempts = true, r.attempts+1
		wait := failureBackoff(r.attempts)
		r.retryAt = c.clock.Now().Add(wait)
		c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, wait)
		c.Logger.WithError(r.err).WithFields(logrus.Fields{"volume": v.Name, "fromBackup": v.Spec.FromBackup, "attempts": r.attempts, "retryIn": wait}).
			Warn("Restore failed: it is tried again after a backoff")
		return false, r.err
	default:
		return true, nil
	}
}

// syncRestoreStatus syncs the restore of a volume made fromBackup, when
// the replicas are all made and canRun (the engine may open them here),
// and writes its state into status (the Engine's restoreStatus and
// lastRestoredBackup) and vstatus (restoreRequired, restoreInitiated and
// the Restore condition). It reports whether the restore runs. A failed
// restore's error is returned after its status is written.
func (c *Controller) syncRestoreStatus(ctx context.Context, v *longhorn.Volume, e *longhorn.Engine, replicas []*longhorn.Replica,
	dirs []instance.ReplicaDir, status *longhorn.EngineStatus, vstatus *longhorn.VolumeStatus, canRun bool,
) (bool, error) {
	vstatus.RestoreRequired = v.Spec.FromBackup != "" && status.LastRestoredBackup != v.Spec.FromBackup
	restoring := false
	if vstatus.RestoreRequired && len(replicas) == v.Spec.NumberOfReplicas && canRun {
		var err error
		if restoring, err = c.syncRestore(v, dirs); err != nil {
			status.RestoreStatus = restoreStatus(dirs, v.Spec.FromBackup, volumeengine.RestoreStatus{State: "error", Error: err.Error()})
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeRestore, longhorn.ConditionStatusFalse, ReasonRestoreFailed, err.Error(), c.clock.Now())
			return false, c.writeFailure(ctx, attachWrites{engine: e, status: status, volume: v, vstatus: vstatus}, err)
		}
		if restoring {
			st := volumeengine.RestoreStatus{IsRestoring: true, State: "in_progress"}
			// The engine's own status once its restore has begun (before,
			// it may still hold a failed attempt's).
			if run, ok := c.instances.Get(v.Name); ok {
				if rs := run.Engine.RestoreStatus(); rs.IsRestoring {
					st = rs
				}
			}
			status.RestoreStatus = restoreStatus(dirs, v.Spec.FromBackup, st)
			vstatus.RestoreInitiated = true
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeRestore, longhorn.ConditionStatusFalse, ReasonRestoring,
				fmt.Sprintf("restoring %s: %d%%", v.Spec.FromBackup, st.Progress), c.clock.Now())
		} else {
			if err := c.markHealthy(ctx, replicas); err != nil {
				return false, err
			}
			_, _, backup, _ := backupstore.ParseURL(v.Spec.FromBackup)
			status.RestoreStatus = restoreStatus(dirs, v.Spec.FromBackup, volumeengine.RestoreStatus{State: "complete", Progress: 100, LastRestored: backup})
			status.LastRestoredBackup = v.Spec.FromBackup
			vstatus.RestoreRequired, vstatus.RestoreInitiated = false, true
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeRestore, longhorn.ConditionStatusTrue, ReasonRestored, "", c.clock.Now())
		}
	}
	if v.Spec.FromBackup != "" && !vstatus.RestoreRequired && kit.GetCondition(vstatus.Conditions, ConditionTypeRestore).Status != longhorn.ConditionStatusTrue {
		// The Engine says the volume holds its backup: a volume status
		// write lost after the restore (a conflict) must not leave it
		// Restoring, which the CSI driver waits on.
		vstatus.RestoreInitiated = true
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeRestore, longhorn.ConditionStatusTrue, ReasonRestored, "", c.clock.Now())
	}
	return restoring, nil
}

// restoring reports whether a restore of the volume runs on this node.
func (c *Controller) restoring(volume string) bool {
	c.restores.mu.Lock()
	defer c.restores.mu.Unlock()
	r := c.restores.runs[volume]
	if r == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// stopRestore cancels the volume's restore, if one runs, for a deletion.
// It does not wait: a run blocked on a stalled target ends when the
// target's call does, and writes nothing after the cancel (the engine
// checks before each block), so the volume's data may go at once.
func (c *Controller) stopRestore(volume string) {
	c.restores.mu.Lock()
	r := c.restores.runs[volume]
	delete(c.restores.runs, volume)
	c.restores.mu.Unlock()
	if r != nil {
		r.cancel()
		c.Logger.WithField("volume", volume).Info("Cancelled the restore of the volume being deleted")
	}
}

// restoreStatus is the Engine's restoreStatus for a restore of url into
// the replicas: from the engine while it runs, else from the run's end.
func restoreStatus(replicas []instance.ReplicaDir, url string, st volumeengine.RestoreStatus) map[string]*longhorn.RestoreStatus {
	out := make(map[string]*longhorn.RestoreStatus, len(replicas))
	for _, r := range replicas {
		out[r.Name] = &longhorn.RestoreStatus{IsRestoring: st.IsRestoring, Progress: st.Progress, State: st.State, Error: st.Error,
			LastRestored: st.LastRestored, CurrentRestoringBackup: restoringBackup(st, url), BackupURL: url}
	}
	return out
}

func restoringBackup(st volumeengine.RestoreStatus, url string) string {
	if !st.IsRestoring {
		return ""
	}
	if _, _, backup, err := backupstore.ParseURL(url); err == nil {
		return backup
	}
	return ""
}

// restore writes the volume's fromBackup into its new replicas, through an
// engine started without a frontend, before the volume may attach; it
// runs in its own goroutine (syncRestore). Cancelling ctx stops it.
func (c *Controller) restore(ctx context.Context, v *longhorn.Volume, dirs []instance.ReplicaDir) error {
	target, volume, backup, err := backupstore.ParseURL(v.Spec.FromBackup)
	if err != nil {
		return err
	}
	// The backup's target is opened with the credential of the
	// BackupTarget the URL names; a URL inside none of them with
	// default's (the backup-target-credential-secret), as Longhorn does.
	var cred map[string]string
	if backupstore.UsesCredential(target) {
		if cred, err = c.restoreCredential(ctx, target); err != nil {
			return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
		}
	}
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	info, err := store.Get(volume, backup)
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	if err := c.checkRestoreBackingImage(v, info); err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	_, wasRunning := c.instances.Get(v.Name)
	run, err := c.instances.Start(v.Name, v.Spec.Size, dirs, false)
	if err != nil {
		return err
	}
	start := time.Now()
	err = func() (err error) {
		// A panic in the restore (a malformed backup, a bug) is its error:
		// the engine started for it stops, and the volume says why.
		defer panics.Recover(c.Logger.WithFields(logrus.Fields{"volume": v.Name, "fromBackup": v.Spec.FromBackup}), &err)
		return run.Engine.RestoreFrom(ctx, v.Spec.FromBackup, cred)
	}()
	if !wasRunning {
		if stopErr := c.instances.StopEngine(v.Name, run.Engine); err == nil {
			err = stopErr
		}
	}
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	c.Logger.WithFields(logrus.Fields{"volume": v.Name, "backup": backup, "took": time.Since(start).Round(time.Millisecond)}).Info("Restored volume from backup")
	return nil
}

// restoreCredential is the credential of the BackupTarget whose URL
// target is, default's when it is none's.
func (c *Controller) restoreCredential(ctx context.Context, target string) (map[string]string, error) {
	t, err := c.ds.TargetForURL(target)
	if apierrors.IsNotFound(err) {
		return c.ds.GetBackupTargetCredential(ctx)
	}
	if err != nil {
		return nil, err
	}
	return c.ds.TargetCredential(ctx, t)
}
