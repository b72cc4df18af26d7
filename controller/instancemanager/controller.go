package instancemanager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhlisters "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/listers/longhorn/v1beta2"
)

// statusPoll is how often the node's instance managers are looked at:
// their pods have no informer here (one pod per node is read by name).
const statusPoll = 15 * time.Second

// Controller writes the status of its node's InstanceManagers (state, IP,
// the engines each runs), makes the node's instance manager of the
// manager's image again when it is gone, and deletes one of another image
// once it hosts nothing (Set.Retire), or at once when it has no pod.
//
// Ownership: each node's manager writes its own node's InstanceManagers
// alone; the others are skipped.
type Controller struct {
	*kit.Base
	keeper *Keeper
	set    *Set
	lister lhlisters.InstanceManagerLister
}

// NewController wires the controller to the InstanceManager informer.
// set holds the clients of the node's instance managers.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, inf datastore.Informers, keeper *Keeper, set *Set) *Controller {
	informer := inf.Longhorn.Longhorn().V1beta2().InstanceManagers()
	c := &Controller{keeper: keeper, set: set, lister: informer.Lister()}
	c.Base = kit.NewBase("longhorn-instance-manager", logger, metrics, c.sync, informer.Informer().HasSynced)
	informer.Informer().AddEventHandler(c.EventHandler())
	return c
}

// Changed tells the controller that what the node's instance managers run
// changed: their status is written again.
func (c *Controller) Changed() {
	for _, name := range c.set.Names() {
		c.Queue.Add(c.keeper.cfg.Namespace + "/" + name)
	}
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	im, err := c.lister.InstanceManagers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		if c.keeper.currentName() == name {
			// The node's own was deleted: its pod goes with it (a user's
			// request); a new one is made for the engines to come.
			if _, err := c.keeper.Ensure(ctx); err != nil && !isPending(err) {
				return kit.Result{}, err
			}
			return kit.Result{RequeueAfter: statusPoll}, nil
		}
		c.set.Forget(name)
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if im.Spec.NodeID != c.keeper.cfg.NodeID || im.DeletionTimestamp != nil {
		return kit.Result{}, nil
	}
	log := c.Logger.WithFields(logrus.Fields{"instanceManager": im.Name, "image": im.Spec.Image})
	isCurrent := c.keeper.currentName() == im.Name
	pod, err := c.keeper.kube.CoreV1().Pods(ns).Get(ctx, im.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pod, err = nil, nil
	}
	if err != nil {
		return kit.Result{}, fmt.Errorf("get pod of instance manager %s: %w", im.Name, err)
	}
	client, member := c.set.Member(im.Name)
	if !isCurrent && !member && !mayHost(pod) {
		// Of another image, not followed (it had no pod when the manager
		// started), and it runs nothing.
		if err := c.keeper.remove(ctx, im); err != nil {
			return kit.Result{}, err
		}
		log.Info("Deleted an instance manager of another image than the manager's, which runs nothing")
		return kit.Result{}, nil
	}
	status := c.observe(im, pod, client)
	if !equality.Semantic.DeepEqual(im.Status, status) {
		updated := im.DeepCopy()
		updated.Status = status
		if _, err := c.keeper.lh.LonghornV1beta2().InstanceManagers(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return kit.Result{}, fmt.Errorf("update status of instance manager %s: %w", im.Name, err)
		}
		if status.CurrentState != im.Status.CurrentState {
			log.WithFields(logrus.Fields{"state": status.CurrentState, "was": im.Status.CurrentState, "reason": status.Message}).Info("Instance manager changed state")
		}
	}
	switch {
	case isCurrent && (status.CurrentState == longhorn.InstanceManagerStateStopped || status.CurrentState == longhorn.InstanceManagerStateError):
		// Its pod is gone or ended: made again (the client asks too, as
		// its watch breaks).
		if _, err := c.keeper.Ensure(ctx); err != nil && !isPending(err) {
			return kit.Result{}, err
		}
	case !isCurrent && member:
		if retired, err := c.set.Retire(ctx, im, pod); err != nil || retired {
			return kit.Result{}, err
		}
	}
	return kit.Result{RequeueAfter: statusPoll}, nil
}

// observe is im's status as its pod and, for one the set follows, its
// client say.
func (c *Controller) observe(im *longhorn.InstanceManager, pod *corev1.Pod, client Engines) longhorn.InstanceManagerStatus {
	state, why := podState(pod)
	status := longhorn.InstanceManagerStatus{OwnerID: c.keeper.cfg.NodeID, CurrentState: state, Message: why}
	if pod != nil {
		status.IP = pod.Status.PodIP
	}
	if client == nil {
		return status
	}
	if client.Connected() {
		status.CurrentState, status.Message = longhorn.InstanceManagerStateRunning, ""
		if im.Spec.Image != c.keeper.cfg.Image {
			status.Message = fmt.Sprintf("runs another image than the manager's (%s): each of its volumes moves to the manager's at its next attach; it is deleted once it hosts none", c.keeper.cfg.Image)
		}
	} else if state == longhorn.InstanceManagerStateStarting && mayHost(pod) && im.Status.CurrentState == longhorn.InstanceManagerStateRunning {
		status.CurrentState, status.Message = longhorn.InstanceManagerStateUnknown, "its pod runs, and its socket stopped answering"
	}
	for _, r := range client.Running() {
		if status.InstanceEngines == nil {
			status.InstanceEngines = map[string]longhorn.InstanceProcess{}
		}
		name := datastore.EngineName(r.Volume)
		status.InstanceEngines[name] = longhorn.InstanceProcess{
			Spec:   longhorn.InstanceProcessSpec{Name: name, VolumeName: r.Volume},
			Status: longhorn.InstanceProcessStatus{State: longhorn.InstanceStateRunning, ID: r.ID, Endpoint: r.Endpoint},
		}
	}
	return status
}

func isPending(err error) bool { return errors.Is(err, ErrPending) }
