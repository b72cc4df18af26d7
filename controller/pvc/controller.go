package pvc

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// volumeHandleIndex indexes PersistentVolumes by the Longhorn volume they
// are (their CSI volumeHandle).
const volumeHandleIndex = "longhorn-volume-handle"

// Controller keeps a Volume's kubernetesStatus and, for a claim labelled
// as the source of its jobs, its recurring-job labels (see the package
// doc). Its key is the volume's.
//
// Ownership: the volume's owner (status.ownerID, claimed by the volume
// controller) writes; other nodes do nothing. A change of owner enqueues
// the volume.
type Controller struct {
	*kit.Base
	ds       *datastore.DataStore
	nodeID   string
	clock    clock.Clock
	recorder record.EventRecorder
	pvs      cache.Indexer
	claims   cache.Indexer
}

// NewController wires the controller to the Volume informer and to
// cluster-wide PersistentVolume and claim informers (inf.Cluster).
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string,
	clk clock.Clock, recorder record.EventRecorder) (*Controller, error) {
	volumes := inf.Longhorn.Longhorn().V1beta2().Volumes().Informer()
	pvs := inf.Cluster.Core().V1().PersistentVolumes().Informer()
	claims := inf.Cluster.Core().V1().PersistentVolumeClaims().Informer()
	if err := pvs.AddIndexers(cache.Indexers{volumeHandleIndex: pvVolumeHandles}); err != nil {
		return nil, fmt.Errorf("index PersistentVolumes by volume: %w", err)
	}
	c := &Controller{ds: ds, nodeID: nodeID, clock: clk, recorder: recorder, pvs: pvs.GetIndexer(), claims: claims.GetIndexer()}
	c.Base = kit.NewBase("longhorn-kubernetes-pv", logger, metrics, c.sync, volumes.HasSynced, pvs.HasSynced, claims.HasSynced)
	volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.Enqueue,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*longhorn.Volume)
			n, ok2 := cur.(*longhorn.Volume)
			if !ok1 || !ok2 || o.Status.OwnerID != n.Status.OwnerID || o.Status.KubernetesStatus != n.Status.KubernetesStatus ||
				!maps.Equal(o.Labels, n.Labels) {
				c.Enqueue(cur)
			}
		},
	})
	pvs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePV,
		UpdateFunc: func(old, cur any) { c.enqueuePV(old); c.enqueuePV(cur) },
		DeleteFunc: c.enqueuePV,
	})
	claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueClaim,
		UpdateFunc: func(_, cur any) { c.enqueueClaim(cur) },
		DeleteFunc: c.enqueueClaim,
	})
	return c, nil
}

// pvVolumeHandles is the index function: a Longhorn PV's volume handle.
func pvVolumeHandles(obj any) ([]string, error) {
	if h := volumeHandle(obj); h != "" {
		return []string{h}, nil
	}
	return nil, nil
}

// volumeHandle is the Longhorn volume a PV (or its tombstone) is, or "".
func volumeHandle(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csi.DriverName {
		return ""
	}
	return pv.Spec.CSI.VolumeHandle
}

func (c *Controller) enqueueVolume(name string) {
	if name != "" {
		c.Queue.Add(c.ds.Namespace() + "/" + name)
	}
}

func (c *Controller) enqueuePV(obj any) { c.enqueueVolume(volumeHandle(obj)) }

// enqueueClaim enqueues the volume of the PV a claim names.
func (c *Controller) enqueueClaim(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || claim.Spec.VolumeName == "" {
		return
	}
	if pv, exists, err := c.pvs.GetByKey(claim.Spec.VolumeName); err == nil && exists {
		c.enqueuePV(pv)
	}
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	v, err := c.ds.GetVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if v.Status.OwnerID != c.nodeID || v.DeletionTimestamp != nil {
		return kit.Result{}, nil
	}
	log := c.Logger.WithField("volume", name)
	pv, err := c.volumePV(name)
	if err != nil {
		return kit.Result{}, err
	}
	ks := kubernetesStatus(v.Status.KubernetesStatus, pv, c.clock.Now().UTC().Format(time.RFC3339))
	if ks != v.Status.KubernetesStatus {
		updated := v.DeepCopy()
		updated.Status.KubernetesStatus = ks
		if _, err := c.ds.UpdateVolumeStatus(ctx, updated); err != nil {
			return kit.Result{}, fmt.Errorf("update the kubernetes status of volume %s: %w", name, err)
		}
		log.WithFields(logrus.Fields{"pv": ks.PVName, "pvStatus": ks.PVStatus, "namespace": ks.Namespace, "pvc": ks.PVCName,
			"lastPVCRefAt": ks.LastPVCRefAt}).Info("Volume's PersistentVolume and claim recorded")
	}
	claim, err := c.claim(pv)
	if err != nil || !isSource(claim) {
		return kit.Result{}, err
	}
	if jobLabelsEqual(claimJobLabels(v.Labels, claim), v.Labels) {
		return kit.Result{}, nil
	}
	var before map[string]string
	changed := false
	updated, err := c.ds.UpdateVolumeLabels(ctx, name, func(labels map[string]string) bool {
		// labels is the volume as it is now, re-read: the cache may be
		// behind.
		before = selection(labels)
		want := claimJobLabels(labels, claim)
		changed = !maps.Equal(labels, want)
		clear(labels)
		maps.Copy(labels, want)
		return changed
	})
	if err != nil {
		return kit.Result{}, fmt.Errorf("give volume %s the job labels of its claim %s/%s: %w", name, claim.Namespace, claim.Name, err)
	}
	if !changed {
		return kit.Result{}, nil
	}
	after := selection(updated.Labels)
	log.WithFields(logrus.Fields{"pvc": claim.Namespace + "/" + claim.Name, "before": sortedKeys(before), "after": sortedKeys(after)}).
		Info("Volume's recurring job labels follow its claim (labelled " + types.RecurringJobSourceLabel + ": enabled)")
	if c.recorder != nil {
		c.recorder.Eventf(updated, corev1.EventTypeNormal, "RecurringJobLabelsFromClaim",
			"the recurring job labels of claim %s/%s are the volume's: %v", claim.Namespace, claim.Name, sortedKeys(after))
	}
	return kit.Result{}, nil
}

// volumePV is the volume's PersistentVolume: the bound one when more than
// one names it (a static PV made beside the driver's), else the first by
// name; nil when none does.
func (c *Controller) volumePV(name string) (*corev1.PersistentVolume, error) {
	objs, err := c.pvs.ByIndex(volumeHandleIndex, name)
	if err != nil {
		return nil, err
	}
	var pvs []*corev1.PersistentVolume
	for _, obj := range objs {
		if pv, ok := obj.(*corev1.PersistentVolume); ok {
			pvs = append(pvs, pv)
		}
	}
	sort.Slice(pvs, func(i, j int) bool {
		bi, bj := pvs[i].Status.Phase == corev1.VolumeBound, pvs[j].Status.Phase == corev1.VolumeBound
		if bi != bj {
			return bi
		}
		return pvs[i].Name < pvs[j].Name
	})
	if len(pvs) == 0 {
		return nil, nil
	}
	return pvs[0], nil
}

// claim is the claim the PV is bound to, nil when there is none.
func (c *Controller) claim(pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	if pv == nil || pv.Spec.ClaimRef == nil {
		return nil, nil
	}
	obj, exists, err := c.claims.GetByKey(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	if err != nil || !exists {
		return nil, err
	}
	claim, _ := obj.(*corev1.PersistentVolumeClaim)
	return boundClaim(pv, claim), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
