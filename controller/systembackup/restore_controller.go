package systembackup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/rights"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
)

// RestoreController runs system restores.
//
// Ownership: kit.Ownership with no preferred node, in status.ownerID.
type RestoreController struct {
	*kit.Base
	ds        *datastore.DataStore
	ownership kit.Ownership
	now       func() time.Time
	written   kit.Written
	// review asks whether the restore's requester has a right; self is
	// the manager's own account, whose restores are not asked about
	// (restore_rights.go).
	review rights.Reviewer
	self   string
}

// NewRestoreController wires the controller to the SystemRestore and
// SystemBackup informers. kube asks the SubjectAccessReviews of a
// restore's requester.
func NewRestoreController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, kube kubernetes.Interface, cfg Config) *RestoreController {
	lh := inf.Longhorn.Longhorn().V1beta2()
	srs := lh.SystemRestores().Informer()
	sbs := lh.SystemBackups().Informer()
	c := &RestoreController{ds: ds, ownership: kit.Ownership{NodeID: cfg.NodeID, IsUp: ds.IsNodeUp}, now: time.Now,
		review: rights.SubjectAccessReviews(kube), self: cfg.ManagerUser}
	c.Base = kit.NewBase("longhorn-system-restore", logger, metrics, c.sync, srs.HasSynced, sbs.HasSynced)
	srs.AddEventHandler(c.EventHandler())
	// A restore waiting for its system backup to be synced from the
	// target goes on when it is.
	sbs.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, cur any) {
		sb := cur.(*longhorn.SystemBackup)
		if sb.Status.State != longhorn.SystemBackupStateReady {
			return
		}
		srs, err := ds.ListSystemRestoresRO()
		if err != nil {
			return
		}
		for _, sr := range srs {
			if sr.Spec.SystemBackup == sb.Name && sr.Status.State == longhorn.SystemRestoreStatePending {
				c.Enqueue(sr)
			}
		}
	}})
	return c
}

func (c *RestoreController) writeStatus(ctx context.Context, sr *longhorn.SystemRestore) (*longhorn.SystemRestore, error) {
	stored, err := c.ds.UpdateSystemRestoreStatus(ctx, sr)
	if err == nil {
		c.written.Remember(sr.Namespace+"/"+sr.Name, stored.ResourceVersion)
	}
	return stored, err
}

func (c *RestoreController) setState(ctx context.Context, sr *longhorn.SystemRestore, state longhorn.SystemRestoreState, reason string, cause error) (*longhorn.SystemRestore, error) {
	sr = sr.DeepCopy()
	sr.Status.State = state
	if cause != nil {
		sr.Status.Conditions = kit.SetCondition(sr.Status.Conditions, longhorn.SystemRestoreConditionTypeError, longhorn.ConditionStatusTrue, reason, cause.Error(), c.now())
	}
	return c.writeStatus(ctx, sr)
}

func (c *RestoreController) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, nil
	}
	sr, err := c.ds.GetSystemRestoreRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if c.written.Stale(key, sr.ResourceVersion) || sr.DeletionTimestamp != nil || !c.ownership.Responsible(sr.Status.OwnerID, "") {
		return kit.Result{}, nil
	}
	log := c.Logger.WithFields(logrus.Fields{"systemRestore": sr.Name, "systemBackup": sr.Spec.SystemBackup})
	if claimed, err := c.ownership.Claim(log, sr.Status.OwnerID, func(owner string) error {
		claimed := sr.DeepCopy()
		claimed.Status.OwnerID = owner
		_, err := c.writeStatus(ctx, claimed)
		return err
	}); claimed || err != nil {
		return kit.Result{}, err
	}
	switch sr.Status.State {
	case longhorn.SystemRestoreStateCompleted, longhorn.SystemRestoreStateError:
		return kit.Result{}, nil
	}
	return kit.Result{}, c.restore(ctx, sr, log)
}

// restore reads, checks and applies the archive. Nothing is written to
// the cluster before all of the archive has been read and checked.
func (c *RestoreController) restore(ctx context.Context, sr *longhorn.SystemRestore, log *logrus.Entry) error {
	fail := func(reason string, err error) error {
		log.WithError(err).WithField("reason", reason).Warn("System restore failed")
		_, werr := c.setState(ctx, sr, longhorn.SystemRestoreStateError, reason, err)
		return werr
	}
	if err := systembackup.CheckName(sr.Spec.SystemBackup); err != nil {
		return fail(longhorn.SystemRestoreConditionReasonRestore, fmt.Errorf("spec.systemBackup: %w", err))
	}
	user, err := requesterOf(sr)
	if err != nil {
		return fail(longhorn.SystemRestoreConditionReasonRestore, err)
	}
	sb, err := c.ds.GetSystemBackupRO(sr.Spec.SystemBackup)
	if apierrors.IsNotFound(err) {
		return fail(longhorn.SystemRestoreConditionReasonRestore, fmt.Errorf("spec.systemBackup: SystemBackup %q does not exist", sr.Spec.SystemBackup))
	}
	if err != nil {
		return err
	}
	if sb.Status.State == longhorn.SystemBackupStateError {
		return fail(longhorn.SystemRestoreConditionReasonRestore, fmt.Errorf("spec.systemBackup: SystemBackup %q failed; restore another", sb.Name))
	}
	if sb.Status.State != longhorn.SystemBackupStateReady {
		if sr.Status.State != longhorn.SystemRestoreStatePending {
			_, err := c.setState(ctx, sr, longhorn.SystemRestoreStatePending, "", nil)
			return err
		}
		return nil // the SystemBackup's becoming Ready brings it back
	}
	t, err := openDefaultTarget(ctx, c.ds)
	if err == nil && t.driver == nil {
		err = errNoTarget
	}
	if err != nil {
		return fail(longhorn.SystemRestoreConditionReasonRestore, fmt.Errorf("default backup target: %w", err))
	}
	st := sr.DeepCopy()
	st.Status.State = longhorn.SystemRestoreStateDownloading
	st.Status.SourceURL = sourceURL(t.URL, sb.Status.Version, sb.Name)
	if sr, err = c.writeStatus(ctx, st); err != nil {
		return err
	}
	cfg, err := systembackup.LoadConfig(t.driver, sb.Status.Version, sb.Name)
	if err != nil {
		return fail(longhorn.SystemRestoreConditionReasonUnpack, err)
	}
	archive, err := systembackup.Download(t.driver, cfg)
	if err != nil {
		return fail(longhorn.SystemRestoreConditionReasonUnpack, err)
	}
	if sr, err = c.setState(ctx, sr, longhorn.SystemRestoreStateUnpacking, "", nil); err != nil {
		return err
	}
	contents, err := systembackup.Parse(sb.Name, archive)
	if err != nil {
		return fail(longhorn.SystemRestoreConditionReasonUnpack, err)
	}
	if sr, err = c.setState(ctx, sr, longhorn.SystemRestoreStateRestoring, "", nil); err != nil {
		return err
	}
	res, err := c.apply(ctx, user, contents, t.store.URL, log)
	var pe *planError
	if errors.As(err, &pe) {
		return fail(longhorn.SystemRestoreConditionReasonRestore, err)
	}
	if err != nil {
		return err // a write failed: retried; what was made is found made
	}
	log.WithFields(logrus.Fields{"created": res.created, "kept": res.kept, "settings": res.settings, "volumesWithoutBackup": res.noBackup}).Info("System restore completed")
	_, err = c.setState(ctx, sr, longhorn.SystemRestoreStateCompleted, "", nil)
	return err
}

// sourceURL is where the archive is, as Longhorn's
// GetSystemBackupURL writes it.
func sourceURL(target, version, name string) string {
	u, err := url.Parse(target)
	if err != nil {
		return ""
	}
	u.Path = path.Join(u.Path, "backupstore", systembackup.SubDirectory, version, name)
	return u.String()
}
