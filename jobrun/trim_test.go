package jobrun

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// trimManager answers a filesystem-trim run: vol-0000 is mounted, vol-0001
// attached with nothing mounted, vol-0002 detached, vol-0003's fstrim
// fails. It records the actions it was sent.
type trimManager struct {
	mu      sync.Mutex
	actions []string
}

func (f *trimManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	if parts[0] == "settings" {
		reply(200, map[string]string{"value": map[string]string{"recurring-job-max-retention": "100"}[parts[1]]})
		return
	}
	if parts[0] != "volumes" {
		reply(404, map[string]any{"status": 404, "message": "not found"})
		return
	}
	vol := parts[1]
	if r.Method == http.MethodGet {
		state := "attached"
		if vol == "vol-0002" {
			state = "detached"
		}
		reply(200, client.Volume{Name: vol, State: state, Robustness: "healthy", NodeID: "node-1"})
		return
	}
	action := r.URL.Query().Get("action")
	f.mu.Lock()
	f.actions = append(f.actions, vol+" "+action)
	f.mu.Unlock()
	switch {
	case action == "trimFilesystem" && vol == "vol-0001":
		reply(400, map[string]any{"type": "error", "status": 400, "code": client.CodeNoMountedFilesystem, "message": "volume vol-0001 is not staged by the CSI driver on this node"})
	case action == "trimFilesystem" && vol == "vol-0003":
		reply(500, map[string]any{"type": "error", "status": 500, "message": "fstrim: input/output error"})
	default:
		reply(200, map[string]string{})
	}
}

// The filesystem-trim task trims and then purges a mounted volume, skips a
// detached one without attaching it and one with no mounted filesystem,
// and fails a volume whose fstrim failed.
func TestTheFilesystemTrimTask(t *testing.T) {
	f := &trimManager{}
	r := newTaskExecutor(t, 4, longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeFilesystemTrim, Cron: "@daily", Concurrency: 1}, f)
	res, err := r.Run(context.Background(), "snap")
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != 1 || res.Skipped != 2 || res.Failed != 1 {
		t.Errorf("result %+v, want 1 succeeded, 2 skipped, 1 failed", res)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []string{"vol-0000 trimFilesystem", "vol-0000 snapshotPurge", "vol-0001 trimFilesystem", "vol-0003 trimFilesystem"}
	// The client sends a call a 5xx answered again for a while.
	if got := slices.Compact(slices.Clone(f.actions)); !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q (nothing attached, no purge after a refused or failed trim)", f.actions, want)
	}
}
