package jobrun

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// attachWait bounds each wait for a volume to be attached or detached.
var attachWait = 2 * time.Minute

// attachment is what a run does about a volume's attachment.
type attachment int

const (
	// useAttached: the volume is attached by someone else; work on it and
	// leave it attached.
	useAttached attachment = iota
	// attachOwn: the volume is detached with no node set; the run attaches
	// it in its own name and detaches it in its own name after.
	attachOwn
	// waitOther: someone else is attaching the volume; wait for it, work,
	// leave it attached.
	waitOther
	// waitOwn: this run's own attachment (a run resumed for the same
	// tick); wait for it, work, detach it after.
	waitOwn
	// waitDetached: someone is detaching the volume; wait until it is
	// detached, then decide again.
	waitDetached
	// skip: the run leaves the volume alone (the reason says why).
	skip
)

// attacherID names this run when it attaches volumes:
// recurring-job/<job>/<tick>.
func (r *Executor) attacherID(job string) string {
	return "recurring-job/" + job + "/" + r.tickLabel()
}

func (r *Executor) tickLabel() string { return r.Tick.UTC().Format("20060102T150405Z") }

// decideAttachment says what the run, named me, does about vol. Only a
// volume that is detached with no node set is attached by the run.
func decideAttachment(vol *client.Volume, me string, allowDetached bool) (attachment, string) {
	attached := vol.State == string(longhorn.VolumeStateAttached)
	switch {
	case vol.State == string(longhorn.VolumeStateDeleting):
		return skip, "the volume is being deleted"
	case attached && vol.NodeID != "" && vol.AttachedBy == me:
		return waitOwn, "attached by this run"
	case attached && vol.NodeID != "":
		return useAttached, "attached by " + attacher(vol.AttachedBy)
	case !allowDetached:
		return skip, "the volume is not attached and " + string(types.SettingNameAllowRecurringJobWhileVolumeDetached) + " is false"
	case vol.NodeID != "" && vol.AttachedBy == me:
		return waitOwn, "being attached by this run"
	case vol.NodeID != "":
		return waitOther, "being attached to " + vol.NodeID + " by " + attacher(vol.AttachedBy)
	case vol.State == string(longhorn.VolumeStateDetached):
		return attachOwn, "detached with no node set"
	}
	return waitDetached, "being detached (state " + vol.State + ")"
}

func attacher(by string) string {
	if by == "" {
		return "a user or workload"
	}
	return by
}

// attachForRun makes the volume usable for the run. It returns whether the
// run owns the attachment (and must call releaseAfterRun), or a reason to
// skip the volume.
func (r *Executor) attachForRun(ctx context.Context, job string, vol *client.Volume, allowDetached bool) (own bool, skipReason string, err error) {
	me := r.attacherID(job)
	log := r.Log.WithFields(logrus.Fields{"volume": vol.Name, "attacher": me})
	// A few rounds: a detach to wait for, or an attach lost to someone
	// faster, is decided again on the volume as it is then.
	for round := 0; round < 4; round++ {
		plan, why := decideAttachment(vol, me, allowDetached)
		switch plan {
		case skip:
			return false, why, nil
		case useAttached:
			return false, "", nil
		case waitOther, waitOwn:
			log.WithField("reason", why).Info("Waiting for the volume to be attached")
			if err := r.waitAttached(ctx, vol.Name); err != nil {
				return plan == waitOwn, "", err
			}
			if plan == waitOther {
				log.WithField("reason", why).Info("Using the volume; the run leaves it attached")
			}
			return plan == waitOwn, "", nil
		case waitDetached:
			log.WithField("reason", why).Info("Waiting for the volume to be detached before attaching it")
			if err := r.waitState(ctx, vol.Name, string(longhorn.VolumeStateDetached)); err != nil {
				return false, "", err
			}
		case attachOwn:
			// The volume attaches on the node that holds the most of its
			// replicas, where the run's backup reads a local one; one with
			// none placed yet, on any Ready node.
			node := vol.ReplicasNode()
			if node == "" {
				if node, err = r.API.ReadyNode(ctx); err != nil {
					return false, "", err
				}
			}
			err = r.API.Attach(ctx, vol.Name, node, me)
			if err == nil {
				log.WithFields(logrus.Fields{"node": node, "reason": why}).Info("Attached the volume for the run; it is detached after unless someone takes it over")
				return true, "", r.waitAttached(ctx, vol.Name)
			}
			if !isConflict(err) {
				// The attach may have been written before the error: the
				// run's detach in its own name undoes only that.
				return true, "", fmt.Errorf("attach for the run: %w", err)
			}
			log.WithError(err).Info("Someone else attached the volume first; deciding again")
		}
		if vol, err = r.API.Volume(ctx, vol.Name); err != nil {
			return false, "", err
		}
	}
	return false, "", fmt.Errorf("volume %s: its attachment kept changing; not run", vol.Name)
}

// releaseAfterRun detaches a volume the run attached, in the run's name:
// a volume taken over meanwhile (a user's or workload's attach) stays
// attached.
func (r *Executor) releaseAfterRun(ctx context.Context, job, volume string) {
	me := r.attacherID(job)
	log := r.Log.WithFields(logrus.Fields{"volume": volume, "attacher": me})
	err := r.API.Detach(ctx, volume, me)
	switch {
	case err == nil:
		log.Info("Detached the volume the run attached")
	case isConflict(err):
		log.WithField("reason", err.Error()).Info("The volume was taken over during the run; left attached")
	case client.IsNotFound(err):
		log.Info("The volume was deleted during the run")
	default:
		log.WithError(err).Error("Cannot detach the volume after the run")
	}
}

// detachedGrace is how long a volume must show no node before a run that
// waits for it to be attached concludes it was detached: the manager's API
// answers from its cache, which may not have the attach just written yet.
const detachedGrace = 3 * time.Second

// waitAttached waits until the volume is attached; it fails when the
// volume has had no node for detachedGrace (detached meanwhile) or after
// attachWait.
func (r *Executor) waitAttached(ctx context.Context, volume string) error {
	deadline := time.Now().Add(attachWait)
	var noNodeSince time.Time
	for {
		v, err := r.API.Volume(ctx, volume)
		switch {
		case err == nil && v.State == string(longhorn.VolumeStateAttached) && v.NodeID != "":
			return nil
		case err == nil && v.NodeID == "":
			if noNodeSince.IsZero() {
				noNodeSince = time.Now()
			} else if time.Since(noNodeSince) >= detachedGrace {
				return fmt.Errorf("volume %s was detached while the run waited for it to be attached", volume)
			}
		case err == nil:
			noNodeSince = time.Time{}
		case client.IsNotFound(err):
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("volume %s was not attached within %s", volume, attachWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func isConflict(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict
}
