package jobrun

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// bvRow is a backup volume as the API lists it.
type bvRow struct {
	Name             string `json:"name"`
	VolumeName       string `json:"volumeName"`
	BackupTargetName string `json:"backupTargetName"`
}

// backupManager answers a backup job's calls as the API does, from
// memory: backup volumes by name, each of a volume in a target, listed
// with ?volumeName= and ?backupTargetName=; a snapshotBackup completes at
// once, in a backup volume of its own.
type backupManager struct {
	mu        sync.Mutex
	bvs       []bvRow
	backups   map[string][]client.Backup // by backup volume name
	deleted   []string
	backedUp  []string // snapshotBackup's, as volume/target
	snapshots []client.Snapshot
}

func (f *backupManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	var in struct {
		Name             string
		Labels           map[string]string
		BackupTargetName string
	}
	json.NewDecoder(r.Body).Decode(&in)
	switch {
	case parts[0] == "settings":
		reply(200, map[string]string{"value": ""})
	case parts[0] == "backupvolumes" && len(parts) == 1:
		q := r.URL.Query()
		var data []bvRow
		for _, bv := range f.bvs {
			if (q.Get("volumeName") == "" || bv.VolumeName == q.Get("volumeName")) && (q.Get("backupTargetName") == "" || bv.BackupTargetName == q.Get("backupTargetName")) {
				data = append(data, bv)
			}
		}
		reply(200, map[string]any{"data": data})
	case parts[0] == "backupvolumes":
		switch r.URL.Query().Get("action") {
		case "backupList":
			reply(200, map[string]any{"data": f.backups[parts[1]]})
		case "backupDelete":
			f.deleted = append(f.deleted, parts[1]+"/"+in.Name)
			reply(200, map[string]string{})
		}
	case parts[0] == "volumes":
		vol := parts[1]
		switch r.URL.Query().Get("action") {
		case "snapshotList":
			reply(200, map[string]any{"data": f.snapshots})
		case "snapshotCreate":
			f.snapshots = append(f.snapshots, client.Snapshot{Name: in.Name, UserCreated: true, Created: time.Now().Format(time.RFC3339Nano), Labels: in.Labels})
			reply(200, map[string]string{"name": in.Name})
		case "snapshotBackup":
			f.backedUp = append(f.backedUp, vol+"/"+in.BackupTargetName)
			bv := "bv-" + vol + "-" + in.BackupTargetName
			f.bvs = append(f.bvs, bvRow{Name: bv, VolumeName: vol, BackupTargetName: in.BackupTargetName})
			f.backups[bv] = append(f.backups[bv], client.Backup{Name: "b-new", State: "Completed", SnapshotName: in.Name, Labels: in.Labels,
				Created: time.Now().UTC().Format(time.RFC3339), BackupTargetName: in.BackupTargetName})
			reply(200, map[string]string{"name": "b-new"})
		default:
			reply(200, map[string]string{})
		}
	default:
		reply(404, map[string]any{"status": 404, "message": "not found"})
	}
}

// TestABackupJobFindsItsBackupVolumeByVolumeAndTarget: a job backing vol
// up to offsite, where the name offsite's backup volume of vol would have
// (vol-<8 hex>) is default's backup volume of a volume named so, neither
// takes that volume's backup of the same tick as its own nor deletes its
// backups by retention: it backs vol up, and keeps its own.
func TestABackupJobFindsItsBackupVolumeByVolumeAndTarget(t *testing.T) {
	other := types.BackupVolumeObjectName("vol", "offsite")
	f := &backupManager{backups: map[string][]client.Backup{}}
	r := newTaskExecutor(t, 0, longhorn.RecurringJobSpec{Task: "backup", Cron: "@hourly", Retain: 1}, f)
	tick := r.tickLabel()
	jobLabels := func(tick string) map[string]string {
		return map[string]string{types.LabelRecurringJob: "snap", types.LabelRecurringJobTick: tick}
	}
	f.bvs = []bvRow{{Name: other, VolumeName: other, BackupTargetName: "default"}}
	f.backups[other] = []client.Backup{
		{Name: "b-old", State: "Completed", Labels: jobLabels("earlier"), Created: "2026-11-21T01:00:00Z", BackupTargetName: "default"},
		{Name: "b-tick", State: "Completed", Labels: jobLabels(tick), Created: "2026-11-22T01:00:00Z", BackupTargetName: "default"},
	}
	job := &longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "snap"}, Spec: longhorn.RecurringJobSpec{Task: "backup", Retain: 1}}
	if err := r.backup(context.Background(), job, "vol", "offsite", jobLabels(tick), false); err != nil {
		t.Fatal(err)
	}
	if len(f.backedUp) != 1 || f.backedUp[0] != "vol/offsite" {
		t.Errorf("backed up %v, want vol to offsite once (not %s's backup of the tick taken as its own)", f.backedUp, other)
	}
	for _, d := range f.deleted {
		if strings.HasPrefix(d, other+"/") {
			t.Errorf("deleted %s, a backup of volume %s", d, other)
		}
	}
}
