package jobrun

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// The manager runner's runs read the settings from its cache, as they
// read the job and its volumes: a burst of 10,000 due jobs made 20,000
// requests to the manager's own API for two settings it holds already.
// The value is the cache's: a max retention of 2 makes a job that keeps 3
// invalid, where the API (which says 100) would have let it run.
func TestAManagerRunReadsSettingsFromTheCacheNotTheAPI(t *testing.T) {
	var settingRequests atomic.Int32
	f := &fakeManager{snapshots: map[string][]client.Snapshot{}}
	r := newTaskExecutor(t, 1, longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 3, Concurrency: 1}, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/v1/settings/") {
			settingRequests.Add(1)
		}
		f.ServeHTTP(w, req)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := r.Longhorn.LonghornV1beta2().Settings(ns).Create(ctx, &longhorn.Setting{
		ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameRecurringJobMaxRetention), Namespace: ns}, Value: "2",
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inf := datastore.NewInformers(r.Longhorn, r.Kube, ns, 0)
	r.Cache = datastore.New(ns, r.Longhorn, r.Kube, inf)
	inf.Start(ctx.Done())
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := r.Cache.GetSettingRO(types.SettingNameRecurringJobMaxRetention); err == nil {
			if _, err := r.Cache.GetRecurringJobRO("snap"); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never held the setting and the job")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Decided = true

	_, err := r.Run(ctx, "snap")
	if err == nil || !strings.Contains(err.Error(), "recurring-job-max-retention") {
		t.Fatalf("a job keeping 3 with a cached max retention of 2 ran (err %v)", err)
	}
	if n := settingRequests.Load(); n != 0 {
		t.Fatalf("the run asked the manager's API for settings %d times; the cache holds them", n)
	}
}
