package backingimage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	bimanager "github.com/cadence-storage/longhorn-manager/backingimage/manager"
	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// managerRewatchDelay is the pause before watching a manager again after
// its Watch stream ended.
const managerRewatchDelay = time.Second

// ManagerController runs the manager server of every
// BackingImageManager on this node, follows it through Watch, brings each
// wanted file to the disk (from the data source, or from a ready peer on
// another disk), deletes the files no longer wanted, and mirrors the
// files' states into the object's status.
//
// Ownership: pinned to spec.nodeID, the node of the manager's disk.
type ManagerController struct {
	*kit.Base
	ds     *datastore.DataStore
	nodeID string
	runner runner.ServerRunner
	// defaultImage is the image managers run from; a manager of another
	// image is replaced (see manager_replace.go).
	defaultImage string
	// tls is what the managers are called with.
	tls *mtls.Identity

	clients followers[*managerConnection]

	mu sync.Mutex // guards retried
	// retried holds when a failed file was last asked for again, by
	// manager/image/uuid, so a file that keeps failing is not retried in
	// a loop.
	retried map[string]time.Time
}

// failedFileRetryDelay is the least time between two attempts to get a
// failed file again.
const failedFileRetryDelay = 5 * time.Second

// managerConnection is the client and Watch of one running server.
type managerConnection struct {
	addr   string
	client *bimanager.Client
	cancel context.CancelFunc
}

func (m *managerConnection) address() string { return m.addr }

func (m *managerConnection) end() {
	m.cancel()
	_ = m.client.Close()
}

// NewManagerController wires the controller to its informers.
// Any data source or manager change enqueues this node's managers: one of
// them may now fetch or sync a file.
func NewManagerController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers,
	nodeID, defaultImage string, runner runner.ServerRunner, tls *mtls.Identity) *ManagerController {
	lh := inf.Longhorn.Longhorn().V1beta2()
	c := &ManagerController{ds: ds, nodeID: nodeID, defaultImage: defaultImage, runner: runner, tls: tls,
		retried: map[string]time.Time{}}
	c.Base = kit.NewBase("longhorn-backing-image-manager", logger, metrics, c.sync,
		lh.BackingImageManagers().Informer().HasSynced, lh.BackingImageDataSources().Informer().HasSynced, lh.BackingImages().Informer().HasSynced)
	enqueueAll := func(any) { c.enqueueNodeManagers() }
	handler := cache.ResourceEventHandlerFuncs{AddFunc: enqueueAll, UpdateFunc: func(_, cur any) { enqueueAll(cur) }, DeleteFunc: enqueueAll}
	lh.BackingImageManagers().Informer().AddEventHandler(c.EventHandler())
	lh.BackingImageManagers().Informer().AddEventHandler(handler)
	lh.BackingImageDataSources().Informer().AddEventHandler(handler)
	// A disk that stops (or starts) being ready changes what its manager
	// may do; heartbeats and probes alone do not.
	lh.Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*longhorn.Node)
			n, ok2 := cur.(*longhorn.Node)
			if ok1 && ok2 && n.Name == nodeID && !maps.Equal(diskReadiness(o), diskReadiness(n)) {
				c.enqueueNodeManagers()
			}
		},
	})
	return c
}

// diskReadiness maps a node's disk UUIDs to their readiness.
func diskReadiness(n *longhorn.Node) map[string]bool {
	out := make(map[string]bool, len(n.Status.DiskStatus))
	for _, st := range n.Status.DiskStatus {
		if st != nil && st.DiskUUID != "" {
			out[st.DiskUUID] = kit.GetCondition(st.Conditions, longhorn.ConditionTypeReady).Status == longhorn.ConditionStatusTrue
		}
	}
	return out
}

// diskProblem says why the manager's disk cannot be used now (gone from
// the node, or not ready: another disk mounted at its path, its folder
// gone), or "" when it can.
func (c *ManagerController) diskProblem(bim *longhorn.BackingImageManager) string {
	disk, err := c.ds.GetDiskByUUID(bim.Spec.DiskUUID)
	if err != nil {
		return fmt.Sprintf("disk %s is gone from node %s", bim.Spec.DiskUUID, bim.Spec.NodeID)
	}
	if !disk.Ready {
		return fmt.Sprintf("disk %s (%s) is not ready: %s", disk.Name, disk.Path, disk.NotReady)
	}
	return ""
}

func (c *ManagerController) enqueueNodeManagers() {
	bims, err := c.ds.ListBackingImageManagersRO()
	if err != nil {
		return
	}
	for _, bim := range bims {
		if bim.Spec.NodeID == c.nodeID {
			c.Enqueue(bim)
		}
	}
}

// Run runs the controller until ctx ends, then ends every Watch. The
// servers themselves are stopped by the runner's owner (the daemon).
func (c *ManagerController) Run(ctx context.Context, workers int) error {
	defer c.clients.stopAll()
	return c.Base.Run(ctx, workers)
}

func managerServerKey(name string) string { return "backing-image-manager/" + name }

func (c *ManagerController) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	bim, err := c.ds.GetBackingImageManagerRO(name)
	if apierrors.IsNotFound(err) {
		c.stopServer(name, "its object is gone")
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if bim.Spec.NodeID != c.nodeID {
		return kit.Result{}, nil
	}
	log := c.Logger.WithFields(logrus.Fields{"backingImageManager": name, "diskUUID": bim.Spec.DiskUUID})
	if bim.DeletionTimestamp != nil {
		c.stopServer(name, "its object is being deleted")
		return kit.Result{}, nil
	}
	all, err := c.ds.ListBackingImageManagersRO()
	if err != nil {
		return kit.Result{}, err
	}
	replacement := replacementOf(bim, c.defaultImage, all)
	if retired, err := c.retire(ctx, bim, replacement, log); retired || err != nil {
		return kit.Result{}, err
	}
	status := bim.Status.DeepCopy()
	status.OwnerID = c.nodeID
	if problem := c.diskProblem(bim); problem != "" {
		// Nothing may touch the folder: the server stops, and the files
		// are unknown until the disk is back and the next server has
		// verified them.
		c.stopServer(name, problem)
		status.CurrentState, status.IP = longhorn.BackingImageManagerStateUnknown, ""
		for fname, f := range status.BackingImageFileMap {
			f.State, f.Progress, f.Message = longhorn.BackingImageStateUnknown, 0, problem
			status.BackingImageFileMap[fname] = f
		}
		if bim.Status.CurrentState != status.CurrentState {
			log.WithField("reason", problem).Warn("The disk of the backing image manager cannot be used: stopped its server")
		}
		return kit.Result{}, c.writeStatus(ctx, bim, status)
	}
	conn, err := c.ensureServer(key, bim, log)
	if errors.Is(err, runner.ErrServerPending) {
		// Not a failure: the server's pod is on its way.
		log.WithField("reason", err.Error()).Debug("Waiting for the backing image manager server")
		status.CurrentState, status.IP = longhorn.BackingImageManagerStateStarting, ""
		return kit.Result{RequeueAfter: serverPendingRecheck}, c.writeStatus(ctx, bim, status)
	}
	if err != nil {
		status.CurrentState = longhorn.BackingImageManagerStateError
		status.IP = ""
		if werr := c.writeStatus(ctx, bim, status); werr != nil {
			return kit.Result{}, werr
		}
		return kit.Result{}, err
	}
	files, err := conn.client.List(ctx)
	if err != nil {
		status.CurrentState = longhorn.BackingImageManagerStateUnknown
		if werr := c.writeStatus(ctx, bim, status); werr != nil {
			return kit.Result{}, werr
		}
		return kit.Result{}, err
	}
	if status.APIVersion == 0 {
		if v, minV, err := conn.client.VersionGet(ctx); err == nil {
			status.APIVersion, status.APIMinVersion = v, minV
		}
	}
	if replacement != nil {
		// Being replaced: the files are the new manager's to check and
		// change; this one only serves them until then.
		log.WithField("replacement", replacement.Name).Debug("Outdated backing image manager: waiting for its replacement to take the files over")
		return kit.Result{}, c.writeStatus(ctx, bim, runningStatus(status, conn.addr, files))
	}
	again := c.reconcileFiles(ctx, log, conn.client, bim, all, files)
	return again, c.writeStatus(ctx, bim, runningStatus(status, conn.addr, files))
}

// retire deletes the manager when it is no longer needed: replaced by a
// manager of the default image that has every file ready (the files stay
// on the disk for it), or keeping no file at all. The delete carries the
// resource version, so a manager changed meanwhile is kept. It reports
// whether the sync is done.
func (c *ManagerController) retire(ctx context.Context, bim *longhorn.BackingImageManager, replacement *longhorn.BackingImageManager, log *logrus.Entry) (bool, error) {
	name := bim.Name
	if replacement != nil && len(filesNotTakenOver(bim, replacement)) == 0 {
		// The manager of the default image has every file ready: this one
		// goes, and its files stay on the disk for the new one.
		err := c.ds.DeleteBackingImageManagerIfUnchanged(ctx, name, bim.ResourceVersion)
		if err == nil || apierrors.IsNotFound(err) {
			log.WithFields(logrus.Fields{"image": bim.Spec.Image, "replacement": replacement.Name, "replacementImage": replacement.Spec.Image}).
				Info("Replaced a backing image manager of an old image: the new one has every file ready; the files stay")
			c.stopServer(name, "replaced by "+replacement.Name)
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		// Changed meanwhile: the next sync decides again.
		return true, nil
	}
	if len(bim.Spec.BackingImages) == 0 && len(bim.Status.BackingImageFileMap) == 0 {
		// Nothing to keep: the manager goes, unless a backing image was
		// added meanwhile (the delete carries the resource version).
		err := c.ds.DeleteBackingImageManagerIfUnchanged(ctx, name, bim.ResourceVersion)
		if err == nil || apierrors.IsNotFound(err) {
			log.Info("Deleted the backing image manager: its disk keeps no backing image")
			c.stopServer(name, "it keeps no file")
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		// Changed meanwhile: the next sync decides again.
		return true, nil
	}
	return false, nil
}

// reconcileFiles deletes from the disk the files no longer wanted (unless
// a sibling manager of the disk wants them or replicas use them) and
// prepares the wanted ones that are missing or failed; files is updated
// with what the server now reports. A failed file asked for again too
// recently is left, and the result says when it may be.
func (c *ManagerController) reconcileFiles(ctx context.Context, log *logrus.Entry, client *bimanager.Client,
	bim *longhorn.BackingImageManager, all []*longhorn.BackingImageManager, files map[string]*bimanager.FileInfo) kit.Result {
	var again kit.Result
	for fname, f := range files {
		if bim.Spec.BackingImages[fname] == f.UUID {
			continue
		}
		if wantedBySibling(bim, all, fname, f.UUID) {
			continue
		}
		if users := c.usersOnDisk(bim.Spec.DiskUUID, fname, f.UUID); len(users) > 0 {
			log.WithFields(logrus.Fields{"backingImage": fname, "uuid": f.UUID, "replicas": users}).Warn("Keeping a backing image file replicas on this disk use")
			continue
		}
		if err := client.Delete(ctx, fname, f.UUID); err != nil {
			log.WithFields(logrus.Fields{"backingImage": fname, "uuid": f.UUID}).WithError(err).Warn("Cannot delete a backing image file no longer wanted")
			continue
		}
		log.WithFields(logrus.Fields{"backingImage": fname, "uuid": f.UUID}).Info("Deleted a backing image file no longer wanted on this disk")
		delete(files, fname)
	}
	for biName, uuid := range bim.Spec.BackingImages {
		f := files[biName]
		if f != nil && f.UUID == uuid && f.State != longhorn.BackingImageStateUnknown && f.State != longhorn.BackingImageStateFailed {
			continue
		}
		if f != nil && f.UUID == uuid && f.State == longhorn.BackingImageStateFailed {
			if ok, wait := c.mayRetry(bim.Name, biName, uuid); !ok {
				again = kit.Soonest(again, kit.Result{RequeueAfter: wait})
				continue
			}
		}
		if info := c.prepareFile(ctx, log, client, bim, biName, uuid, f); info != nil {
			files[biName] = info
		}
	}
	return again
}

// runningStatus is the status of a running manager with its files.
func runningStatus(status *longhorn.BackingImageManagerStatus, address string, files map[string]*bimanager.FileInfo) *longhorn.BackingImageManagerStatus {
	status.CurrentState = longhorn.BackingImageManagerStateRunning
	status.IP = address
	status.BackingImageFileMap = make(map[string]longhorn.BackingImageFileInfo, len(files))
	for fname, f := range files {
		status.BackingImageFileMap[fname] = longhorn.BackingImageFileInfo{Name: f.Name, UUID: f.UUID, State: f.State,
			Size: f.Size, VirtualSize: f.VirtualSize, Progress: f.Progress, CurrentChecksum: f.CurrentChecksum, Message: f.Message}
	}
	return status
}

// mayRetry reports whether a failed file may be asked for again now, and
// when not, how long until it may.
func (c *ManagerController) mayRetry(bimName, name, uuid string) (bool, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := bimName + "/" + name + "/" + uuid
	if wait := time.Until(c.retried[k].Add(failedFileRetryDelay)); wait > 0 {
		return false, wait
	}
	c.retried[k] = time.Now()
	return true, 0
}

// usersOnDisk names the replicas on the disk that use the image's file of
// uuid (the image's current one).
func (c *ManagerController) usersOnDisk(diskUUID, name, uuid string) []string {
	bi, err := c.ds.GetBackingImageRO(name)
	if err != nil || bi.Status.UUID != uuid {
		return nil
	}
	replicas, err := c.ds.ListBackingImageReplicasRO(name)
	if err != nil {
		return []string{"unknown: " + err.Error()}
	}
	var users []string
	for _, r := range replicas {
		if r.Spec.DiskID == diskUUID {
			users = append(users, r.Name)
		}
	}
	return users
}

// prepareFile starts getting one wanted file: a file found on the disk at
// start is verified (Fetch with no source), the disk of the data source
// takes its file, any other disk syncs from a manager that has it ready.
// It answers nil when there is nothing to do yet.
func (c *ManagerController) prepareFile(ctx context.Context, log *logrus.Entry, client *bimanager.Client,
	bim *longhorn.BackingImageManager, name, uuid string, cur *bimanager.FileInfo) *bimanager.FileInfo {
	log = log.WithFields(logrus.Fields{"backingImage": name, "uuid": uuid})
	bi, err := c.ds.GetBackingImageRO(name)
	if err != nil || bi.Status.UUID != uuid || bi.DeletionTimestamp != nil {
		return nil
	}
	checksum := bi.Spec.Checksum
	if checksum == "" {
		checksum = bi.Status.Checksum
	}
	if cur != nil && cur.UUID == uuid && cur.State == longhorn.BackingImageStateUnknown {
		info, err := client.Fetch(ctx, name, uuid, checksum, "", 0)
		if err != nil {
			log.WithError(err).Warn("Cannot verify the backing image file found on the disk")
			return nil
		}
		log.Info("Verifying the backing image file found on the disk")
		return info
	}
	if bids, err := c.ds.GetBackingImageDataSourceRO(name); err == nil && bids.Spec.UUID == uuid && !bids.Spec.FileTransferred {
		if bids.Spec.DiskUUID != bim.Spec.DiskUUID || bids.Status.CurrentState != longhorn.BackingImageStateReadyForTransfer || bids.Status.IP == "" {
			return nil
		}
		info, err := client.Fetch(ctx, name, uuid, checksum, bids.Status.IP, bids.Status.Size)
		if err != nil {
			log.WithError(err).Warn("Cannot fetch the backing image file from its data source")
			return nil
		}
		log.WithField("dataSource", bids.Status.IP).Info("Fetching the backing image file from its data source")
		return info
	}
	peers, err := c.ds.ListBackingImageManagersRO()
	if err != nil {
		return nil
	}
	for _, peer := range peers {
		f, ok := peer.Status.BackingImageFileMap[name]
		if peer.Name == bim.Name || peer.Spec.DiskUUID == bim.Spec.DiskUUID || !ok || f.UUID != uuid || f.State != longhorn.BackingImageStateReady ||
			peer.Status.CurrentState != longhorn.BackingImageManagerStateRunning || peer.Status.IP == "" {
			continue
		}
		info, err := client.Sync(ctx, name, uuid, checksum, peer.Status.IP, f.Size)
		if err != nil {
			log.WithField("peer", peer.Name).WithError(err).Warn("Cannot sync the backing image file from a peer")
			continue
		}
		log.WithFields(logrus.Fields{"peer": peer.Name, "peerDiskUUID": peer.Spec.DiskUUID}).Info("Syncing the backing image file from a peer manager")
		return info
	}
	return nil
}

func (c *ManagerController) writeStatus(ctx context.Context, bim *longhorn.BackingImageManager, status *longhorn.BackingImageManagerStatus) error {
	if !kit.StatusChanged(&bim.Status, status) {
		return nil
	}
	bim = bim.DeepCopy()
	bim.Status = *status
	_, err := c.ds.UpdateBackingImageManagerStatus(ctx, bim)
	return err
}

// ensureServer starts the manager's server when it does not run, and a
// Watch of it that enqueues the object on every change.
func (c *ManagerController) ensureServer(key string, bim *longhorn.BackingImageManager, log *logrus.Entry) (*managerConnection, error) {
	skey := managerServerKey(bim.Name)
	addr, err := c.runner.Address(skey)
	if err != nil {
		if !errors.Is(err, runner.ErrServerNotStarted) && !errors.Is(err, runner.ErrServerPending) {
			log.WithError(err).Warn("The backing image manager server exited; starting it again")
		}
		args := []string{"backing-image-manager", "--disk-path", bim.Spec.DiskPath, "--disk-uuid", bim.Spec.DiskUUID}
		if err := c.runner.Start(skey, args, runner.WithImage(bim.Spec.Image), runner.WithOwner(bim, "BackingImageManager")); err != nil {
			return nil, err
		}
		if addr, err = c.runner.Address(skey); err != nil {
			return nil, err
		}
	}
	return c.clients.ensure(bim.Name, addr, func() (*managerConnection, error) {
		client, err := bimanager.NewClient(addr, 0, c.tls)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		go c.watch(ctx, key, client)
		return &managerConnection{addr: addr, client: client, cancel: cancel}, nil
	})
}

// watch enqueues the object on every notice of the server, and watches
// again when the stream ends, until ctx ends.
func (c *ManagerController) watch(ctx context.Context, key string, client *bimanager.Client) {
	for ctx.Err() == nil {
		if notices, err := client.Watch(ctx); err == nil {
			for range notices {
				c.Queue.Add(key)
			}
		}
		c.Queue.Add(key)
		select {
		case <-ctx.Done():
		case <-time.After(managerRewatchDelay):
		}
	}
}

func (c *ManagerController) stopServer(name, why string) {
	c.clients.stop(name)
	stopServer(c.runner, c.Logger.WithField("backingImageManager", name), managerServerKey(name), why)
}
