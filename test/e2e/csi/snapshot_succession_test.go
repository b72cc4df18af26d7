//go:build e2e

package csi

import (
	"context"
	"fmt"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// CSI snapshots of a detached volume taken and deleted one right after
// the other, as the external-snapshotter may: each call attaches the
// volume for itself and detaches it after, and the next must not take the
// volume for attached while that detach is still under way (the API's
// reads lag its writes by a moment). Every call succeeds, every snapshot
// is taken and deleted, and the volume is left detached.
func TestCSISnapshotsInQuickSuccessionOfADetachedVolume(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	cs := csiController(t, e)
	ctx := context.Background()
	vol, err := cs.CreateVolume(ctx, createRequest("pvc-succession", 16<<20, map[string]string{"numberOfReplicas": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	volume := vol.GetVolume().GetVolumeId()
	params := map[string]string{"type": "snap"}
	var ids []string
	for i := range 4 {
		snap, err := cs.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{SourceVolumeId: volume, Name: fmt.Sprintf("succession-%d", i), Parameters: params})
		if err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		if !snap.GetSnapshot().GetReadyToUse() {
			t.Errorf("snapshot %d answered not ready", i)
		}
		ids = append(ids, snap.GetSnapshot().GetSnapshotId())
	}
	api := client.NewClient(e.Base+"/v1", 0)
	for i, id := range ids {
		if _, err := cs.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: id}); err != nil {
			t.Fatalf("delete snapshot %d: %v", i, err)
		}
		if _, err := api.SnapshotObject(ctx, volume, fmt.Sprintf("succession-%d", i)); !client.IsNotFound(err) {
			t.Errorf("snapshot %d after its DeleteSnapshot: %v, want not found", i, err)
		}
	}
	// The last call's detach, then the volume as the driver leaves it.
	framework.Eventually(t, 30*time.Second, "the volume detached", func() (bool, error) {
		v, err := api.Volume(ctx, volume)
		return err == nil && v.NodeID == "" && v.State == "detached", err
	})
}
