package instancemanager

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
)

// Engines is what the keeper needs of the client of the node's instance
// manager.
type Engines interface {
	// Connected says whether the client follows the instance manager now.
	Connected() bool
	// Hosting is how many engines it runs.
	Hosting() int
}

// Roll replaces the node's instance manager by one of the manager's image
// when it runs another image and hosts no engine: a volume's engine is
// never stopped for an upgrade, it moves to the new image when its volume
// next attaches after the node's last engine of the old one stopped. The
// gate holds engine starts while it decides, so none starts in the old one
// as it goes. It says whether it began a replacement.
func (k *Keeper) Roll(ctx context.Context, engines Engines) (bool, error) {
	cur := k.Current()
	if cur == nil || cur.Spec.Image == k.cfg.Image {
		return false, nil
	}
	k.gate.Lock()
	if !engines.Connected() || engines.Hosting() > 0 {
		k.gate.Unlock()
		return false, nil
	}
	k.mu.Lock()
	k.rolling = true
	k.mu.Unlock()
	k.gate.Unlock()
	log := k.log.WithFields(logrus.Fields{"instanceManager": cur.Name, "image": cur.Spec.Image, "newImage": k.cfg.Image})
	err := k.lh.LonghornV1beta2().InstanceManagers(k.cfg.Namespace).Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
	if err == nil || apierrors.IsNotFound(err) {
		// The pod goes with its owner; it is deleted here too, for a
		// cluster without a garbage collector.
		err = k.kube.CoreV1().Pods(k.cfg.Namespace).Delete(ctx, cur.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		k.mu.Lock()
		k.rolling = false
		k.mu.Unlock()
		return false, fmt.Errorf("replace instance manager %s of image %s: %w", cur.Name, cur.Spec.Image, err)
	}
	log.Info("The node's instance manager of an older image hosts no engine: deleted it, to run the manager's image")
	return true, nil
}

// Gate wraps the node's Instances so that no engine starts while the
// instance manager is being replaced.
func (k *Keeper) Gate(in instance.Instances) instance.Instances { return gated{Instances: in, k: k} }

type gated struct {
	instance.Instances
	k *Keeper
}

func (g gated) Start(volume string, size int64, replicas []instance.ReplicaDir, frontend bool) (instance.Instance, error) {
	g.k.gate.RLock()
	defer g.k.gate.RUnlock()
	g.k.mu.Lock()
	rolling := g.k.rolling
	g.k.mu.Unlock()
	if rolling {
		return instance.Instance{}, fmt.Errorf("%w: it is being replaced by one of image %s; the engine starts there", ErrPending, g.k.cfg.Image)
	}
	run, err := g.Instances.Start(volume, size, replicas, frontend)
	if err == nil {
		run.InstanceManager = g.k.currentName()
	}
	return run, err
}
