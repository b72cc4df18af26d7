package recurringjob

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// A job synced until it has nothing to do is settled: neither the
// controller's periodic sweep nor the informer's redelivery of the same
// object (a relist) queues it (it would only be validated again). A change of the job, a settings change and a sync
// that writes each queue it again; a job of a peer is never settled.
func TestASweepOrRedeliveryOfASettledJobIsNotQueued(t *testing.T) {
	for _, tc := range []struct {
		name    string
		owner   string
		settles bool
	}{
		{"owned by this node", "node-1", true},
		{"owned by a peer that is up", "node-2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := syncJob(func(j *longhorn.RecurringJob) { j.Status.OwnerID = tc.owner; j.ResourceVersion = "1" })
			lh := lhfake.NewSimpleClientset(job, syncNode("node-1", true), syncNode("node-2", true))
			kube := kubefake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			lhi := inf.Longhorn.Longhorn().V1beta2()
			jobs := lhi.RecurringJobs().Informer().GetIndexer()
			for _, obj := range []any{job, syncNode("node-1", true), syncNode("node-2", true)} {
				var err error
				if j, ok := obj.(*longhorn.RecurringJob); ok {
					err = jobs.Add(j)
				} else {
					err = lhi.Nodes().Informer().GetIndexer().Add(obj)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			c := newSyncTestController(t, lh, kube, inf, longhorn.RecurringJobRunnerManager)
			// Sync until a sync writes nothing, each write brought back
			// into the cache with a new resourceVersion, as the informer
			// would.
			for rv := 2; ; rv++ {
				lh.ClearActions()
				if _, err := c.sync(context.Background(), "ns/daily"); err != nil {
					t.Fatal(err)
				}
				if len(synctable.Writes(lh.Actions())) == 0 {
					break
				}
				if rv > 5 {
					t.Fatal("the job never settles")
				}
				cur, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(context.Background(), "daily", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cur.ResourceVersion = string(rune('0' + rv))
				if err := jobs.Update(cur); err != nil {
					t.Fatal(err)
				}
			}
			obj, _, _ := jobs.GetByKey("ns/daily")
			settledJob := obj.(*longhorn.RecurringJob)

			c.onJobUpdate(settledJob, settledJob)
			if got := c.Queue.Len(); (got == 0) != tc.settles {
				t.Fatalf("a redelivery (a relist) queued %d keys; settled: %v", got, tc.settles)
			}
			// The periodic sweep (the informer has no resync of jobs)
			// queues what is not settled, and only that.
			c.sweep()
			if got := c.Queue.Len(); (got == 0) != tc.settles {
				t.Fatalf("the sweep queued %d keys; settled: %v", got, tc.settles)
			}
			if !tc.settles {
				return
			}
			changed := settledJob.DeepCopy()
			changed.ResourceVersion = "99"
			c.onJobUpdate(settledJob, changed)
			if c.Queue.Len() != 1 {
				t.Fatal("a changed job is not queued")
			}
			key, _ := c.Queue.Get()
			c.Queue.Done(key)
			// A settings change forgets every settled job.
			c.enqueueAll()
			key, _ = c.Queue.Get()
			c.Queue.Done(key)
			c.onJobUpdate(settledJob, settledJob)
			if c.Queue.Len() != 1 {
				t.Fatal("after a settings change a resync is not queued")
			}
		})
	}
}
