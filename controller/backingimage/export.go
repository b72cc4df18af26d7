package backingimage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// exportWaitRecheck is how soon an export that waits for its volume to be
// attached looks again.
const exportWaitRecheck = 5 * time.Second

// maxSnapshotName is the longest snapshot name the engine takes.
const maxSnapshotName = 63

// exportSnapshotName is the snapshot an export takes: named after the
// image and its UUID, so a restarted controller or server finds the one
// taken before instead of taking another, and a new image of the same
// name takes its own.
func exportSnapshotName(bids *longhorn.BackingImageDataSource) string {
	suffix := "-" + bids.Spec.UUID
	name := "bi-" + bids.Name
	if len(name)+len(suffix) > maxSnapshotName {
		name = name[:maxSnapshotName-len(suffix)]
	}
	return name + suffix
}

// prepareExport readies an export-from-volume data source: the volume
// must be attached, with its engine on the data source's node; the export
// reads a snapshot the controller takes first (or the one it took
// before), so the file is one point in time however long the copy takes
// and whatever the volume's users write meanwhile. It returns the server's
// parameters (the spec's and snapshot-name) and its extra flags. An error
// wrapping datastore.ErrExportVolumeNotAttached means: wait.
func (c *DataSourceController) prepareExport(ctx context.Context, bids *longhorn.BackingImageDataSource) (map[string]string, []string, error) {
	src, err := c.ds.ValidateExportSource(bids.Spec.Parameters)
	if err != nil {
		return nil, nil, err
	}
	volume := src.Volume.Name
	if src.EngineNode != "" && src.EngineNode != bids.Spec.NodeID {
		return nil, nil, fmt.Errorf("volume %s: its engine runs on node %s, but the data source's disk %s is on node %s: an export runs on the engine's node",
			volume, src.EngineNode, bids.Spec.DiskUUID, bids.Spec.NodeID)
	}
	client, err := c.newEngineClient(src.EngineAddress, volume)
	if err != nil {
		return nil, nil, err
	}
	defer client.Close()
	snapshot := exportSnapshotName(bids)
	log := c.Logger.WithFields(logrus.Fields{"backingImageDataSource": bids.Name, "volume": volume, "snapshot": snapshot})
	info, err := client.SnapshotGet(ctx, snapshot)
	switch {
	case err == nil && info.Removed:
		return nil, nil, fmt.Errorf("snapshot %s of volume %s, taken for this export, was deleted: delete the backing image and create it again to export anew", snapshot, volume)
	case err == nil:
		log.Info("Export reads the snapshot it took before")
	case errors.Is(err, engineapi.ErrNotFound):
		if _, err := client.SnapshotCreate(ctx, snapshot, map[string]string{types.LabelExportingBackingImage: bids.Name}); err != nil {
			return nil, nil, fmt.Errorf("take the snapshot to export: %w", err)
		}
		log.Info("Took the snapshot of the volume to export")
	default:
		return nil, nil, err
	}
	params := maps.Clone(bids.Spec.Parameters)
	params[longhorn.DataSourceParameterSnapshotName] = snapshot
	return params, []string{"--engine-address", src.EngineAddress}, nil
}

// isExportWait tells an export that waits for its volume from one that
// failed.
func isExportWait(err error) bool { return errors.Is(err, datastore.ErrExportVolumeNotAttached) }

// exportEngineNode is the node of the engine an export-from-volume image
// reads; empty for other sources, or while the volume is not attached.
func (c *ImageController) exportEngineNode(bi *longhorn.BackingImage) string {
	if bi.Spec.SourceType != longhorn.BackingImageDataSourceTypeExportFromVolume {
		return ""
	}
	src, err := c.ds.ValidateExportSource(bi.Spec.SourceParameters)
	if err != nil {
		return ""
	}
	return src.EngineNode
}

// exportMisplaced tells whether an export's data source waits on another
// node than engineNode, where the volume's engine runs (empty when the
// volume is not attached), without having started: it was placed while
// the volume was detached, or on a disk the user named, or its volume was
// attached elsewhere since. It can never read the volume from there: an
// export runs on the engine's node. A data source that is preparing or
// holds its file stays where it is.
func exportMisplaced(bids *longhorn.BackingImageDataSource, engineNode string) bool {
	if bids.Spec.SourceType != longhorn.BackingImageDataSourceTypeExportFromVolume || engineNode == "" ||
		bids.Spec.NodeID == engineNode || bids.Spec.FileTransferred || bids.DeletionTimestamp != nil {
		return false
	}
	switch bids.Status.CurrentState {
	case "", longhorn.BackingImageStatePending, longhorn.BackingImageStateFailed:
		return true
	}
	return false
}

// moveExport deletes a misplaced export's data source, so the next sync
// creates it again on a disk of engineNode: one of spec.disks there, or
// else the node's first disk, added to spec.disks first (the cleanup of
// unused disks removes it later, as any other). The data source's
// deletion brings the image back to the queue.
func (c *ImageController) moveExport(ctx context.Context, log *logrus.Entry, bi *longhorn.BackingImage,
	bids *longhorn.BackingImageDataSource, engineNode string) error {
	log = log.WithFields(logrus.Fields{"from": bids.Spec.NodeID, "to": engineNode, "volume": bi.Spec.SourceParameters[longhorn.DataSourceParameterVolumeName]})
	hasDisk := false
	for diskUUID := range bi.Spec.Disks {
		if d, err := c.ds.GetDiskByUUID(diskUUID); err == nil && d.NodeID == engineNode {
			hasDisk = true
			break
		}
	}
	if !hasDisk {
		disks, err := c.ds.ListNodeDisks(engineNode)
		if err != nil {
			return err
		}
		if len(disks) == 0 {
			return fmt.Errorf("backing image %s: the engine of its volume runs on node %s, which has no disk with a UUID yet", bi.Name, engineNode)
		}
		updated := bi.DeepCopy()
		updated.Spec.Disks[disks[0].UUID] = ""
		if _, err := c.ds.UpdateBackingImage(ctx, updated); err != nil {
			return err
		}
		log.WithFields(logrus.Fields{"diskUUID": disks[0].UUID, "path": disks[0].Path}).Info("Added a disk of the engine's node to the backing image: an export runs there")
	}
	if err := c.ds.DeleteBackingImageDataSource(ctx, bi.Name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	msg := fmt.Sprintf("the volume's engine runs on node %s, not on node %s where the data source waited: the export moves there", engineNode, bids.Spec.NodeID)
	log.Info("Moving the export's data source to the node of the volume's engine")
	c.event(bi, corev1.EventTypeNormal, "ExportMoved", msg)
	return nil
}

// retryFailed tells whether a failed file is worth a new server after the
// backoff: a download, whose source may answer right the next time, and
// an export that failed on the way (a detach, an engine restart), not one
// that hashed wrong (the same snapshot hashes the same). A cancelled file
// was stopped on purpose and stays failed.
func retryFailed(bids *longhorn.BackingImageDataSource, last *datasource.FileStatus) bool {
	if last.State != longhorn.BackingImageStateFailed || last.Message == datasource.CancelledMessage {
		return false
	}
	switch bids.Spec.SourceType {
	case longhorn.BackingImageDataSourceTypeDownload:
		return true
	case longhorn.BackingImageDataSourceTypeExportFromVolume:
		return !strings.Contains(last.Message, backingimage.ErrChecksumMismatch.Error())
	}
	return false
}
