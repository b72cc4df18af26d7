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
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhlisters "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/listers/longhorn/v1beta2"
)

// Client is what the controller reads of the node's instance manager.
type Client interface {
	Engines
	Running() []instancemanager.Running
}

// statusPoll is how often the node's instance managers are looked at:
// their pods have no informer here (one pod per node is read by name).
const statusPoll = 15 * time.Second

// Controller writes the status of its node's InstanceManagers (state, IP,
// the engines it runs), makes the node's instance manager again when it
// is gone, replaces one of an older image once it hosts no engine, and
// deletes those left from older images that run nothing.
//
// Ownership: each node's manager writes its own node's InstanceManagers
// alone; the others are skipped.
type Controller struct {
	*kit.Base
	keeper *Keeper
	client Client
	lister lhlisters.InstanceManagerLister
}

// NewController wires the controller to the InstanceManager informer.
// client is the node's instance manager's.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, inf datastore.Informers, keeper *Keeper, client Client) *Controller {
	informer := inf.Longhorn.Longhorn().V1beta2().InstanceManagers()
	c := &Controller{keeper: keeper, client: client, lister: informer.Lister()}
	c.Base = kit.NewBase("longhorn-instance-manager", logger, metrics, c.sync, informer.Informer().HasSynced)
	informer.Informer().AddEventHandler(c.EventHandler())
	return c
}

// Changed tells the controller that what the instance manager runs
// changed: its status is written again.
func (c *Controller) Changed() {
	if name := c.keeper.currentName(); name != "" {
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
	if !isCurrent && im.Spec.Image != c.keeper.cfg.Image && pod == nil {
		// Left from an older image, and it runs nothing: no pod.
		if err := c.keeper.lh.LonghornV1beta2().InstanceManagers(ns).Delete(ctx, im.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &im.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return kit.Result{}, fmt.Errorf("delete instance manager %s of an older image: %w", im.Name, err)
		}
		log.Info("Deleted an instance manager of an older image, which runs nothing")
		return kit.Result{}, nil
	}
	status := c.observe(im, pod, isCurrent)
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
	if isCurrent {
		if status.CurrentState == longhorn.InstanceManagerStateStopped || status.CurrentState == longhorn.InstanceManagerStateError {
			// Its pod is gone or ended: made again (the client asks too,
			// as its watch breaks).
			if _, err := c.keeper.Ensure(ctx); err != nil && !isPending(err) {
				return kit.Result{}, err
			}
		}
		if _, err := c.keeper.Roll(ctx, c.client); err != nil {
			return kit.Result{}, err
		}
	}
	return kit.Result{RequeueAfter: statusPoll}, nil
}

// observe is im's status as its pod and, for the node's current one, its
// client say.
func (c *Controller) observe(im *longhorn.InstanceManager, pod *corev1.Pod, isCurrent bool) longhorn.InstanceManagerStatus {
	state, why := podState(pod)
	status := longhorn.InstanceManagerStatus{OwnerID: c.keeper.cfg.NodeID, CurrentState: state, Message: why}
	if pod != nil {
		status.IP = pod.Status.PodIP
	}
	if !isCurrent {
		return status
	}
	if c.client.Connected() {
		status.CurrentState, status.Message = longhorn.InstanceManagerStateRunning, ""
		if im.Spec.Image != c.keeper.cfg.Image {
			status.Message = fmt.Sprintf("runs an older image than the manager's (%s): it is replaced once its node's volumes are detached", c.keeper.cfg.Image)
		}
	} else if state == longhorn.InstanceManagerStateStarting && mayHost(pod) && im.Status.CurrentState == longhorn.InstanceManagerStateRunning {
		status.CurrentState, status.Message = longhorn.InstanceManagerStateUnknown, "its pod runs, and its socket stopped answering"
	}
	for _, r := range c.client.Running() {
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
