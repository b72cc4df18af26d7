//go:build e2e

package backup

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// The daemon's requests to an S3 target, counted at versitygw: snapshots
// send none; a backup reads its own volume only, never the whole target;
// a refresh asked for one volume is its backups' listing and record;
// deleting a BackupVolume through the API deletes every backup of it
// from the bucket and leaves the other volume's.
func TestTargetRequestsFromTheDaemon(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	counter := srv.Counter(t)
	e := framework.NewAPIEnv(t)
	for _, vol := range []string{"pa", "pb"} {
		e.Call(t, "POST", "/v1/volumes", `{"name":"`+vol+`","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
		e.Call(t, "POST", "/v1/volumes/"+vol+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
		e.WaitVolume(t, vol, "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	}
	e.Call(t, "PUT", "/v1/settings/backupstore-poll-interval", `{"value":"5m"}`).Expect(t, 400, `setting backupstore-poll-interval: value \"5m\" must be a whole number`)
	e.PutSecret(t, "s3-secret", counter.Credential())
	e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`).Expect(t, 200)
	e.SetBackupTarget(t, srv.Target(""))
	backup := func(vol, snap string) string {
		t.Helper()
		e.Call(t, "POST", "/v1/volumes/"+vol+"?action=snapshotCreate", `{"name":"`+snap+`"}`).Expect(t, 200)
		name := e.Call(t, "POST", "/v1/volumes/"+vol+"?action=snapshotBackup", `{"name":"`+snap+`"}`).Expect(t, 200).Body["name"].(string)
		e.CompletedBackupURL(t, name)
		return name
	}
	backup("pa", "a1")
	backup("pb", "b1")
	framework.Eventually(t, 30*time.Second, "both backup volumes", func() (bool, error) {
		return slices.Equal(framework.Names(e.Call(t, "GET", "/v1/backupvolumes", "")), []string{"pa", "pb"}), nil
	})

	// Snapshots: the engines change, nothing is sent. A refresh asked of
	// pa afterwards goes through the controller's one queue behind those
	// changes, and is its backups' listing alone.
	counter.Reset()
	for _, snap := range []string{"s1", "s2", "s3"} {
		for _, vol := range []string{"pa", "pb"} {
			e.Call(t, "POST", "/v1/volumes/"+vol+"?action=snapshotCreate", `{"name":"`+snap+`-`+vol+`"}`).Expect(t, 200)
		}
	}
	framework.Eventually(t, 30*time.Second, "the snapshots in the engines' status", func() (bool, error) {
		engines, err := e.LH.LonghornV1beta2().Engines(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, en := range engines.Items {
			for name := range en.Status.Snapshots {
				if strings.HasPrefix(name, "s") && len(name) == 5 {
					n++
				}
			}
		}
		return n == 6, nil
	})
	e.Call(t, "POST", "/v1/backupvolumes/pa?action=backupVolumeSync", "").Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "the refresh of pa", func() (bool, error) {
		bv, err := e.LH.LonghornV1beta2().BackupVolumes(e.NS).Get(context.Background(), "pa", metav1.GetOptions{})
		return err == nil && !bv.Status.LastSyncedAt.Before(&bv.Spec.SyncRequestedAt), nil
	})
	// A refresh asked for reads the volume's record too.
	want := []s3test.Request{{Kind: "LIST", Key: "backupstore/volumes/pa/backups/"}, {Kind: "GET", Key: "backupstore/volumes/pa/volume.cfg"}}
	if got := counter.Requests(); !slices.Equal(got, want) {
		t.Fatalf("snapshots and a refresh of pa sent %v, want %v", got, want)
	}

	// A backup of pb: pa and the whole target are not read.
	counter.Reset()
	backup("pb", "b2")
	for _, r := range counter.Requests() {
		if strings.Contains(r.Key, "volumes/pa/") || (r.Kind == "LIST" && r.Key == "backupstore/volumes/") {
			t.Errorf("a backup of pb sent %v", r)
		}
	}

	// Deleting the backup volume pa deletes all of it from the bucket.
	e.Call(t, "DELETE", "/v1/backupvolumes/pa", "").Expect(t, 204)
	framework.Eventually(t, 60*time.Second, "backup volume pa and its backups gone", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().BackupVolumes(e.NS).Get(context.Background(), "pa", metav1.GetOptions{})
		all, _ := e.BackupCount(t)
		return apierrors.IsNotFound(err) && all == 2, nil
	})
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	var left, kept int
	for obj := range client.ListObjects(context.Background(), srv.Bucket, minio.ListObjectsOptions{Prefix: "backupstore/volumes/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		switch {
		case strings.HasPrefix(obj.Key, "backupstore/volumes/pa/"):
			left++
		case strings.HasPrefix(obj.Key, "backupstore/volumes/pb/backups/"):
			kept++
		}
	}
	if left != 0 || kept != 2 {
		t.Fatalf("the bucket holds %d objects of pa (want none) and %d backup configs of pb (want 2)", left, kept)
	}
	if got := framework.Names(e.Call(t, "GET", "/v1/backupvolumes", "")); !slices.Equal(got, []string{"pb"}) {
		t.Errorf("backup volumes after the deletion: %v", got)
	}
}
