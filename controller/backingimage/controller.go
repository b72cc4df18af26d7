package backingimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// backingImageCleanupRecheck is how soon a deleting image looks again for
// files its managers still list.
const backingImageCleanupRecheck = time.Second

// ImageController keeps a BackingImage's data source and its
// entries in the managers of its disks, and sums up their state in the
// image's status. The data source prepares the first file; the manager of
// the data source's disk takes it; the other disks' managers copy it from
// a ready one. It also runs the image's life cycle: a new download when
// every copy failed, the cleanup of files no replica uses, the move to
// managers of the default image, and a deletion held while replicas use
// the image.
//
// Ownership: kit.Ownership with no preferred node, recorded in
// status.ownerID.
type ImageController struct {
	*kit.Base
	ds        *datastore.DataStore
	ownership kit.Ownership
	cfg       ImageControllerConfig
	clock     clock.Clock
	recorder  record.EventRecorder
}

// ImageControllerConfig is what the BackingImage controller needs
// besides its informers.
type ImageControllerConfig struct {
	NodeID string
	// ManagerImage is the default backing image manager image: managers
	// are created with it, and those of another image are replaced.
	ManagerImage string
	Clock        clock.Clock
	Recorder     record.EventRecorder
	// CleanupWaitUnit is the unit of the backing-image-cleanup-wait-interval
	// setting: a minute. Tests only set it shorter, so a cleanup test
	// does not wait minutes.
	CleanupWaitUnit time.Duration
}

// NewImageController wires the controller to its informers: a
// change of a data source or a manager enqueues the images it concerns,
// and so does a replica that starts or stops using an image.
func NewImageController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers,
	cfg ImageControllerConfig) *ImageController {
	if cfg.CleanupWaitUnit <= 0 {
		cfg.CleanupWaitUnit = time.Minute
	}
	lh := inf.Longhorn.Longhorn().V1beta2()
	c := &ImageController{ds: ds, cfg: cfg, clock: cfg.Clock, recorder: cfg.Recorder,
		ownership: kit.Ownership{NodeID: cfg.NodeID, IsUp: ds.IsNodeUp}}
	c.Base = kit.NewBase("longhorn-backing-image", logger, metrics, c.sync,
		lh.BackingImages().Informer().HasSynced, lh.BackingImageDataSources().Informer().HasSynced,
		lh.BackingImageManagers().Informer().HasSynced, lh.Nodes().Informer().HasSynced,
		lh.Replicas().Informer().HasSynced, lh.Settings().Informer().HasSynced)
	lh.BackingImages().Informer().AddEventHandler(c.EventHandler())
	lh.BackingImageDataSources().Informer().AddEventHandler(c.relatedHandler(func(obj any) []string {
		if bids, ok := obj.(*longhorn.BackingImageDataSource); ok {
			return []string{bids.Name}
		}
		return nil
	}))
	lh.BackingImageManagers().Informer().AddEventHandler(c.relatedHandler(func(obj any) []string {
		bim, ok := obj.(*longhorn.BackingImageManager)
		if !ok {
			return nil
		}
		var names []string
		for name := range bim.Spec.BackingImages {
			names = append(names, name)
		}
		for name := range bim.Status.BackingImageFileMap {
			names = append(names, name)
		}
		return names
	}))
	// A replica's disk and image decide which files are in use. An update
	// that moves a replica to another image (or disk) concerns both.
	replicaImage := func(obj any) []string {
		if r, ok := obj.(*longhorn.Replica); ok && r.Spec.BackingImage != "" {
			return []string{r.Spec.BackingImage}
		}
		return nil
	}
	lh.Replicas().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			return len(replicaImage(obj)) > 0
		},
		Handler: c.relatedHandlerPair(replicaImage, func(old, cur any) bool {
			o, ok1 := old.(*longhorn.Replica)
			n, ok2 := cur.(*longhorn.Replica)
			return !ok1 || !ok2 || o.Spec.BackingImage != n.Spec.BackingImage || o.Spec.DiskID != n.Spec.DiskID
		}),
	})
	lh.Settings().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			s, ok := obj.(*longhorn.Setting)
			return ok && s.Name == string(types.SettingNameBackingImageCleanupWaitInterval)
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.enqueueAll() },
			UpdateFunc: func(_, _ any) { c.enqueueAll() },
		},
	})
	return c
}

// enqueueAll enqueues every backing image.
func (c *ImageController) enqueueAll() {
	bis, err := c.ds.ListBackingImagesRO()
	if err != nil {
		return
	}
	for _, bi := range bis {
		c.Enqueue(bi)
	}
}

// relatedHandlerPair is relatedHandler for objects whose update concerns
// the images of both the old and the new object, and only when changed
// says it matters.
func (c *ImageController) relatedHandlerPair(names func(obj any) []string, changed func(old, cur any) bool) cache.ResourceEventHandler {
	one := c.relatedHandler(names)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { one.OnAdd(obj, false) },
		UpdateFunc: func(old, cur any) {
			if changed(old, cur) {
				one.OnAdd(old, false)
				one.OnAdd(cur, false)
			}
		},
		DeleteFunc: func(obj any) { one.OnDelete(obj) },
	}
}

// relatedHandler enqueues the backing images names(obj) returns.
func (c *ImageController) relatedHandler(names func(obj any) []string) cache.ResourceEventHandler {
	add := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		for _, name := range names(obj) {
			c.Queue.Add(c.ds.Namespace() + "/" + name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, cur any) { add(cur) }, DeleteFunc: add}
}

// managerName is the BackingImageManager of a disk that runs from image:
// a manager of another image can keep the disk's files meanwhile, so the
// image is part of the name.
func managerName(image, diskUUID string) string {
	sum := sha256.Sum256([]byte(image))
	return "bim-" + hex.EncodeToString(sum[:])[:8] + "-" + diskUUID
}

func (c *ImageController) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	bi, err := c.ds.GetBackingImageRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if !c.ownership.Responsible(bi.Status.OwnerID, "") {
		return kit.Result{}, nil
	}
	log := c.Logger.WithFields(logrus.Fields{"backingImage": name, "uuid": bi.Status.UUID})
	if bi.DeletionTimestamp != nil {
		return c.cleanup(ctx, log, bi)
	}
	if !kit.HasFinalizer(bi) {
		bi = bi.DeepCopy()
		kit.AddFinalizer(bi)
		_, err := c.ds.UpdateBackingImage(ctx, bi)
		return kit.Result{}, err
	}
	// The UUID comes before anything else, so a new image with an old
	// name never takes the old one's files; a new image gets it with its
	// owner, in one write.
	withUUID := func(bi *longhorn.BackingImage) *longhorn.BackingImage {
		bi = bi.DeepCopy()
		if bi.Status.UUID == "" {
			bi.Status.UUID = uuid.NewString()[:8]
			log.WithField("uuid", bi.Status.UUID).Info("Assigned the backing image its UUID")
		}
		return bi
	}
	if claimed, err := c.ownership.Claim(log, bi.Status.OwnerID, func(owner string) error {
		claimed := withUUID(bi)
		claimed.Status.OwnerID = owner
		_, err := c.ds.UpdateBackingImageStatus(ctx, claimed)
		return err
	}); claimed || err != nil {
		return kit.Result{}, err
	}
	if bi.Status.UUID == "" {
		_, err := c.ds.UpdateBackingImageStatus(ctx, withUUID(bi))
		return kit.Result{}, err
	}
	if len(bi.Spec.Disks) == 0 {
		return kit.Result{}, c.pickFirstDisk(ctx, log, bi)
	}
	bids, err := c.syncDataSource(ctx, log, bi)
	if err != nil {
		return kit.Result{}, err
	}
	managers, err := c.syncManagers(ctx, log, bi)
	if err != nil {
		return kit.Result{}, err
	}
	now := c.clock.Now()
	view := backingImageView{image: bi, dataSource: bids, managers: managers}
	status := backingImageStatus(view, now.UTC().Format(time.RFC3339))
	used, err := c.usedDisks(bi.Name)
	if err != nil {
		return kit.Result{}, err
	}
	status.DiskLastRefAtMap = diskLastRefAt(bi.Spec.Disks, bi.Status.DiskLastRefAtMap, used, now)
	if bids != nil && !bids.Spec.FileTransferred && anyDiskReady(status.DiskFileStatusMap) {
		// A manager holds the first file: the data source's server can go.
		bids = bids.DeepCopy()
		bids.Spec.FileTransferred = true
		if _, err := c.ds.UpdateBackingImageDataSource(ctx, bids); err != nil {
			return kit.Result{}, err
		}
		log.Info("The first file is ready on a disk: marked the data source transferred")
	}
	redownloading, redownloadAfter, err := c.redownloadIfEveryCopyFailed(ctx, log, view, &status, now)
	if err != nil {
		return kit.Result{}, err
	}
	// A new download waits for its least interval: the image comes back
	// then, whatever else it waits for.
	again := kit.Result{RequeueAfter: redownloadAfter}
	if kit.StatusChanged(status, bi.Status) {
		for disk, f := range status.DiskFileStatusMap {
			if old := bi.Status.DiskFileStatusMap[disk]; old == nil || old.State != f.State {
				log.WithFields(logrus.Fields{"diskUUID": disk, "state": f.State, "message": f.Message}).Info("Backing image file changed state")
			}
		}
		bi = bi.DeepCopy()
		bi.Status = status
		if bi, err = c.ds.UpdateBackingImageStatus(ctx, bi); err != nil {
			return again, err
		}
	}
	if redownloading {
		return kit.Result{}, nil
	}
	result, err := c.cleanupUnusedDisks(ctx, log, bi, used, now)
	return kit.Soonest(result, again), err
}

// pickFirstDisk gives an image created with no disk the first disk of the
// owner's node, where its data source will prepare the file.
func (c *ImageController) pickFirstDisk(ctx context.Context, log *logrus.Entry, bi *longhorn.BackingImage) error {
	node := c.cfg.NodeID
	if n := c.exportEngineNode(bi); n != "" {
		// An export runs where the volume's engine does.
		node = n
	}
	disks, err := c.ds.ListNodeDisks(node)
	if err != nil {
		return err
	}
	if len(disks) == 0 {
		return fmt.Errorf("backing image %s has no disk and node %s has no disk with a UUID yet", bi.Name, node)
	}
	bi = bi.DeepCopy()
	bi.Spec.Disks = map[string]string{disks[0].UUID: ""}
	log.WithFields(logrus.Fields{"diskUUID": disks[0].UUID, "path": disks[0].Path}).Info("The backing image names no disk: using the first disk of this node")
	_, err = c.ds.UpdateBackingImage(ctx, bi)
	return err
}

// syncDataSource creates the image's data source on its first disk, and
// replaces one left by an older image of the same name.
func (c *ImageController) syncDataSource(ctx context.Context, log *logrus.Entry, bi *longhorn.BackingImage) (*longhorn.BackingImageDataSource, error) {
	bids, err := c.ds.GetBackingImageDataSourceRO(bi.Name)
	if err == nil && bids.Spec.UUID != bi.Status.UUID {
		log.WithField("oldUUID", bids.Spec.UUID).Info("Deleting the data source of an older backing image of the same name")
		if err := c.ds.DeleteBackingImageDataSource(ctx, bi.Name); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("waiting for the old data source of backing image %s to go", bi.Name)
	}
	if err == nil {
		if node := c.exportEngineNode(bi); exportMisplaced(bids, node) && !anyDiskReady(bi.Status.DiskFileStatusMap) {
			return nil, c.moveExport(ctx, log, bi, bids, node)
		}
		return bids, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if anyDiskReady(bi.Status.DiskFileStatusMap) {
		// The first file was handed over long ago; no new data source.
		return nil, nil
	}
	var disk *datastore.Disk
	engineNode := c.exportEngineNode(bi)
	for _, diskUUID := range slices.Sorted(maps.Keys(bi.Spec.Disks)) {
		d, err := c.ds.GetDiskByUUID(diskUUID)
		if err != nil {
			continue
		}
		// The first disk found, or for an export the first on the
		// engine's node.
		if disk == nil || (engineNode != "" && d.NodeID == engineNode && disk.NodeID != engineNode) {
			disk = d
		}
	}
	if disk == nil {
		return nil, fmt.Errorf("backing image %s: no node has any of its disks %v", bi.Name, slices.Sorted(maps.Keys(bi.Spec.Disks)))
	}
	bids = &longhorn.BackingImageDataSource{
		ObjectMeta: metav1.ObjectMeta{Name: bi.Name, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(bi,
			longhorn.SchemeGroupVersion.WithKind("BackingImage"))}},
		Spec: longhorn.BackingImageDataSourceSpec{UUID: bi.Status.UUID, NodeID: disk.NodeID, DiskUUID: disk.UUID, DiskPath: disk.Path,
			SourceType: bi.Spec.SourceType, Parameters: bi.Spec.SourceParameters, Checksum: bi.Spec.Checksum},
	}
	bids, err = c.ds.CreateBackingImageDataSource(ctx, bids)
	if err != nil {
		return nil, err
	}
	log.WithFields(logrus.Fields{"node": disk.NodeID, "diskUUID": disk.UUID, "sourceType": bi.Spec.SourceType}).Info("Created the backing image's data source")
	return bids, nil
}

// syncManagers puts the image in the manager of every disk of spec.disks
// that runs from the default image (creating it when missing) and takes
// it out of managers of disks it no longer names. It answers, by disk
// UUID, the manager whose file the image's status shows: the default
// one, or while it is not ready yet one of an older image that still
// keeps the file (see manager_replace.go).
func (c *ImageController) syncManagers(ctx context.Context, log *logrus.Entry, bi *longhorn.BackingImage) (map[string]*longhorn.BackingImageManager, error) {
	bims, err := c.ds.ListBackingImageManagersRO()
	if err != nil {
		return nil, err
	}
	current := map[string]*longhorn.BackingImageManager{}
	outdated := map[string][]*longhorn.BackingImageManager{}
	for _, bim := range bims {
		if _, wanted := bi.Spec.Disks[bim.Spec.DiskUUID]; wanted {
			if bim.Spec.Image == c.cfg.ManagerImage {
				current[bim.Spec.DiskUUID] = bim
			} else {
				outdated[bim.Spec.DiskUUID] = append(outdated[bim.Spec.DiskUUID], bim)
			}
			continue
		}
		if _, ok := bim.Spec.BackingImages[bi.Name]; ok {
			if err := c.removeFromManager(ctx, bim, bi.Name); err != nil {
				return nil, err
			}
			log.WithField("backingImageManager", bim.Name).Info("Removed the backing image from the manager of a disk it no longer names")
		}
	}
	out := map[string]*longhorn.BackingImageManager{}
	for _, diskUUID := range slices.Sorted(maps.Keys(bi.Spec.Disks)) {
		bim := current[diskUUID]
		if bim == nil {
			if busy := transferringManager(outdated[diskUUID]); busy != nil {
				// A new manager would find the half-copied file and
				// remove it: the old one keeps the disk until it is done.
				if err := c.addToManager(ctx, log, busy, bi); err != nil {
					return nil, err
				}
				log.WithField("backingImageManager", busy.Name).Info("Waiting for a transfer of the outdated backing image manager to end before replacing it")
				out[diskUUID] = busy
				continue
			}
			disk, err := c.ds.GetDiskByUUID(diskUUID)
			if err != nil {
				log.WithField("diskUUID", diskUUID).WithError(err).Warn("Cannot place the backing image on a disk")
				if len(outdated[diskUUID]) > 0 {
					out[diskUUID] = outdated[diskUUID][0]
				}
				continue
			}
			bim = newManager(c.cfg.ManagerImage, disk.NodeID, diskUUID, disk.Path, outdated[diskUUID])
			bim.Spec.BackingImages[bi.Name] = bi.Status.UUID
			if bim, err = c.ds.CreateBackingImageManager(ctx, bim); err != nil {
				return nil, err
			}
			log.WithFields(logrus.Fields{"backingImageManager": bim.Name, "node": disk.NodeID, "path": disk.Path, "image": c.cfg.ManagerImage,
				"replaces": len(outdated[diskUUID])}).Info("Created the backing image manager of a disk")
		} else if err := c.addToManager(ctx, log, bim, bi); err != nil {
			return nil, err
		}
		out[diskUUID] = shownManager(bi, bim, outdated[diskUUID])
	}
	return out, nil
}

// addToManager puts the image in the manager's spec unless it is there.
func (c *ImageController) addToManager(ctx context.Context, log *logrus.Entry, bim *longhorn.BackingImageManager, bi *longhorn.BackingImage) error {
	if bim.Spec.BackingImages[bi.Name] == bi.Status.UUID {
		return nil
	}
	bim = bim.DeepCopy()
	if bim.Spec.BackingImages == nil {
		bim.Spec.BackingImages = map[string]string{}
	}
	bim.Spec.BackingImages[bi.Name] = bi.Status.UUID
	if _, err := c.ds.UpdateBackingImageManager(ctx, bim); err != nil {
		return err
	}
	log.WithField("backingImageManager", bim.Name).Info("Added the backing image to the manager of a disk")
	return nil
}

func (c *ImageController) removeFromManager(ctx context.Context, bim *longhorn.BackingImageManager, name string) error {
	bim = bim.DeepCopy()
	delete(bim.Spec.BackingImages, name)
	_, err := c.ds.UpdateBackingImageManager(ctx, bim)
	return err
}

// cleanup deletes the data source, takes the image out of every manager
// and waits until no running manager lists its file; then the finalizer
// goes.
func (c *ImageController) cleanup(ctx context.Context, log *logrus.Entry, bi *longhorn.BackingImage) (kit.Result, error) {
	if !kit.HasFinalizer(bi) {
		return kit.Result{}, nil
	}
	if held, err := c.holdDeletion(ctx, log, bi); held || err != nil {
		// A replica going enqueues the image again.
		return kit.Result{}, err
	}
	if _, err := c.ds.GetBackingImageDataSourceRO(bi.Name); err == nil {
		if err := c.ds.DeleteBackingImageDataSource(ctx, bi.Name); err != nil && !apierrors.IsNotFound(err) {
			return kit.Result{}, err
		}
		log.Info("Deleted the data source of a deleted backing image")
	}
	bims, err := c.ds.ListBackingImageManagersRO()
	if err != nil {
		return kit.Result{}, err
	}
	waiting := 0
	for _, bim := range bims {
		if _, ok := bim.Spec.BackingImages[bi.Name]; ok {
			if err := c.removeFromManager(ctx, bim, bi.Name); err != nil {
				return kit.Result{}, err
			}
			log.WithField("backingImageManager", bim.Name).Info("Removed a deleted backing image from a manager")
		}
		if f, ok := bim.Status.BackingImageFileMap[bi.Name]; ok && f.UUID == bi.Status.UUID &&
			bim.Status.CurrentState == longhorn.BackingImageManagerStateRunning {
			waiting++
		}
	}
	if waiting > 0 {
		// The managers' file deletions are polled, not watched.
		return kit.Result{RequeueAfter: backingImageCleanupRecheck}, nil
	}
	bi = bi.DeepCopy()
	kit.RemoveFinalizer(bi)
	if _, err := c.ds.UpdateBackingImage(ctx, bi); err != nil {
		return kit.Result{}, err
	}
	log.Info("Backing image cleaned up: its files and data source are gone")
	return kit.Result{}, nil
}
