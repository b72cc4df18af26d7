package csi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/cadence-storage/longhorn-manager/client"
)

// targetAPI is the manager's API for a volume whose backups go to the
// BackupTarget offsite while the backup-target setting is empty: its
// backup volume there is found by volume and target; the driver attached
// the volume for the backup, which has completed.
type targetAPI struct {
	mu       sync.Mutex
	backup   *client.Backup // in offsite's backup volume of vol
	nodeID   string
	started  int // snapshotBackup calls
	deleted  []string
	detached bool
}

func (a *targetAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	notFound := func() { reply(404, map[string]any{"status": 404, "code": "NotFound", "message": "not found"}) }
	var in struct{ Name string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	action := r.URL.Query().Get("action")
	switch {
	case r.URL.Path == "/v1/settings/backup-target":
		reply(200, map[string]string{"value": ""})
	case r.URL.Path == "/v1/backupvolumes":
		q := r.URL.Query()
		var data []map[string]string
		if a.backup != nil && (q.Get("volumeName") == "" || q.Get("volumeName") == "vol") && (q.Get("backupTargetName") == "" || q.Get("backupTargetName") == "offsite") {
			data = append(data, map[string]string{"name": "vol-0ff51e00", "volumeName": "vol", "backupTargetName": "offsite"})
		}
		reply(200, map[string]any{"data": data})
	case r.URL.Path == "/v1/backupvolumes/vol-0ff51e00" && a.backup != nil:
		switch action {
		case "backupList":
			reply(200, map[string]any{"data": []client.Backup{*a.backup}})
		case "backupGet":
			if in.Name != a.backup.Name {
				notFound()
				return
			}
			reply(200, a.backup)
		case "backupDelete":
			a.deleted = append(a.deleted, in.Name)
			a.backup = nil
			reply(200, map[string]string{})
		}
	case r.URL.Path == "/v1/volumes/vol" && r.Method == http.MethodGet:
		reply(200, client.Volume{Name: "vol", Size: "1073741824", State: "attached", NodeID: a.nodeID, AttachedBy: attacher(snapshotName("vs-1")), BackupTargetName: "offsite"})
	case r.URL.Path == "/v1/volumes/vol" && action == "detach":
		a.detached, a.nodeID = true, ""
		reply(200, map[string]string{})
	case r.URL.Path == "/v1/volumes/vol" && action == "snapshotBackup":
		a.started++
		reply(200, map[string]string{"name": "b-again"})
	default:
		notFound()
	}
}

// TestBakSnapshotOfAVolumeBackedUpToAnotherTarget: a bak VolumeSnapshot
// of a volume whose backups go to offsite is found there: ready once
// its backup completed, with no other backup started, the volume the
// driver attached for it detached; and its deletion deletes the backup
// from offsite.
func TestBakSnapshotOfAVolumeBackedUpToAnotherTarget(t *testing.T) {
	name := snapshotName("vs-1")
	api := &targetAPI{nodeID: "node-1", backup: &client.Backup{Name: "b-1", State: backupCompleted, SnapshotName: name, VolumeSize: "1073741824",
		URL: "file:///offsite?backup=b-1&volume=vol", BackupTargetName: "offsite"}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	d, err := NewDriver(client.NewClient(srv.URL+"/v1", time.Second), Options{Controller: true})
	if err != nil {
		t.Fatal(err)
	}
	s := &controllerServer{d: d}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "vs-1", SourceVolumeId: "vol", Parameters: map[string]string{paramSnapshotType: snapshotTypeBak}})
	if err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if !resp.Snapshot.ReadyToUse || resp.Snapshot.SnapshotId != "bak://vol/b-1" {
		t.Errorf("answered %+v; want bak://vol/b-1 ready", resp.Snapshot)
	}
	api.mu.Lock()
	started, detached := api.started, api.detached
	api.mu.Unlock()
	if started != 0 || !detached {
		t.Errorf("%d backups started, detached %v; want none started and the volume detached", started, detached)
	}
	if _, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "bak://vol/b-1"}); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if len(api.deleted) != 1 || api.deleted[0] != "b-1" {
		t.Errorf("deleted %v from offsite, want b-1", api.deleted)
	}
}
