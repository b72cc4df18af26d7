//go:build e2e

package manager

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhinformers "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/informers/externalversions"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// BenchmarkControlPlaneCostPerWrite measures what one write of each kind
// the snapshot sync makes costs the control plane (apiserver and etcd, one
// process), in processor milliseconds, with one informer watching as the
// manager's does: a Snapshot create (the bare loop's write), a Snapshot
// status update, a RecurringJob create and its take-in's status write,
// and an Engine status update carrying a snapshot chain of 0, 15 and 30
// entries (the engine's mirror through a volume's life at 30 snapshots).
// It is the cost model behind the snapshot and start-up benchmarks'
// ratios.
func BenchmarkControlPlaneCostPerWrite(b *testing.B) {
	const n = 600
	cluster := testcluster.Get(b)
	ns := cluster.NewPlainNamespace(b)
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	client := framework.LHClient(b, cfg)
	lh := client.LonghornV1beta2()
	ctx := context.Background()

	factory := lhinformers.NewSharedInformerFactoryWithOptions(client, 0, lhinformers.WithNamespace(ns))
	lhi := factory.Longhorn().V1beta2()
	for _, inf := range []cache.SharedIndexInformer{lhi.Snapshots().Informer(), lhi.Engines().Informer(), lhi.RecurringJobs().Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{})
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	measure := func(what string, op func(i int) error) {
		time.Sleep(2 * time.Second) // let the watch drain what came before
		before := cluster.CPUSeconds()
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := op(i); err != nil {
				b.Fatalf("%s %d: %v", what, i, err)
			}
		}
		elapsed := time.Since(start)
		time.Sleep(2 * time.Second)
		ms := (cluster.CPUSeconds() - before) * 1000 / n
		b.Logf("%-40s %6.2f ms of control-plane CPU per write, %5.0f writes/s serially", what, ms, float64(n)/elapsed.Seconds())
		b.ReportMetric(ms, what+"-cp-ms")
	}

	snaps := make([]*longhorn.Snapshot, n)
	measure("snapshot-create", func(i int) error {
		s, err := lh.Snapshots(ns).Create(ctx, &longhorn.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("v%03d-s%02d", i%100, i/100)},
			Spec:       longhorn.SnapshotSpec{Volume: fmt.Sprintf("v%03d", i%100), CreateSnapshot: true, Labels: map[string]string{"bench": "scale"}},
		}, metav1.CreateOptions{})
		snaps[i] = s
		return err
	})
	measure("snapshot-status", func(i int) error {
		s := snaps[i].DeepCopy()
		s.Status.ReadyToUse = true
		s.Status.Parent = fmt.Sprintf("v%03d-s%02d", i%100, i/100-1)
		s.Status.Children = map[string]bool{fmt.Sprintf("v%03d-s%02d", i%100, i/100+1): true}
		s.Status.CreationTime = time.Now().UTC().Format(time.RFC3339)
		s.Status.Size = 1 << 20
		s.Status.UserCreated = true
		s.Status.Labels = map[string]string{"bench": "scale"}
		s.Status.OwnerID = "node-1"
		u, err := lh.Snapshots(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		snaps[i] = u
		return err
	})
	jobs := make([]*longhorn.RecurringJob, n)
	measure("recurringjob-create", func(i int) error {
		j, err := lh.RecurringJobs(ns).Create(ctx, &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%04d", i)},
			Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "0 0 1 1 *", Retain: 1},
		}, metav1.CreateOptions{})
		jobs[i] = j
		return err
	})
	// The take-in's one status write: owner, Ready, the observed
	// schedule and generation, the next tick.
	measure("recurringjob-status", func(i int) error {
		j := jobs[i].DeepCopy()
		now := metav1.Now()
		next := metav1.NewTime(now.AddDate(1, 0, 0))
		j.Status.OwnerID = "node-1"
		j.Status.Conditions = []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue, LastTransitionTime: now.UTC().Format(time.RFC3339)}}
		j.Status.ObservedSchedule = &longhorn.RecurringJobObservedSchedule{Cron: j.Spec.Cron}
		j.Status.ObservedGeneration = j.Generation
		j.Status.NextScheduleTime = &next
		u, err := lh.RecurringJobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
		jobs[i] = u
		return err
	})
	for _, chain := range []int{0, 15, 30} {
		engines := make([]*longhorn.Engine, 20)
		for j := range engines {
			e, err := lh.Engines(ns).Create(ctx, &longhorn.Engine{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%02d-e%02d", chain, j)},
			}, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			engines[j] = e
		}
		measure(fmt.Sprintf("engine-status-%d-snapshots", chain), func(i int) error {
			e := engines[i%len(engines)].DeepCopy()
			e.Status.CurrentState = longhorn.InstanceStateRunning
			e.Status.Snapshots = map[string]*longhorn.SnapshotInfo{}
			for k := 0; k < chain; k++ {
				name := fmt.Sprintf("%s-s%02d", e.Name, k)
				info := &longhorn.SnapshotInfo{Name: name, Parent: fmt.Sprintf("%s-s%02d", e.Name, k-1), Children: map[string]bool{fmt.Sprintf("%s-s%02d", e.Name, k+1): true},
					UserCreated: true, Created: time.Now().UTC().Format(time.RFC3339), Size: "1048576", Labels: map[string]string{"bench": "scale"}}
				e.Status.Snapshots[name] = info
			}
			e.Status.Snapshots["volume-head"] = &longhorn.SnapshotInfo{Name: "volume-head", Parent: "x", Size: fmt.Sprint(i)}
			u, err := lh.Engines(ns).UpdateStatus(ctx, e, metav1.UpdateOptions{})
			engines[i%len(engines)] = u
			return err
		})
	}
}
