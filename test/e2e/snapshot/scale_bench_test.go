//go:build e2e

package snapshot

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	lhinformers "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/informers/externalversions"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// snapshotScale is the size of the snapshot benchmark: the 1,000
// volumes × 30 snapshots, 20 × 30 with -short, or
// LONGHORN_BENCH_SNAPSHOT_SCALE=<volumes>x<snapshots>.
func snapshotScale(b *testing.B) (volumes, perVolume int) {
	volumes, perVolume = 1000, 30
	if testing.Short() {
		volumes = 20
	}
	if s := os.Getenv("LONGHORN_BENCH_SNAPSHOT_SCALE"); s != "" {
		if _, err := fmt.Sscanf(s, "%dx%d", &volumes, &perVolume); err != nil {
			b.Fatalf("LONGHORN_BENCH_SNAPSHOT_SCALE=%q: want <volumes>x<snapshots>", s)
		}
	}
	return volumes, perVolume
}

// snapshotBenchNamespace is where a snapshot benchmark starts: the control
// plane, a manager's namespace with its RBAC, the benchmark's size, and the
// open-file limit its engines need.
func snapshotBenchNamespace(b *testing.B) (cluster *testcluster.Cluster, ns string, volumes, perVolume int) {
	b.Helper()
	volumes, perVolume = snapshotScale(b)
	cluster = testcluster.Get(b)
	ns = cluster.NewNamespace(b)
	framework.InstallRBAC(b, cluster.KubeClient(b), ns)
	framework.RaiseOpenFileLimit(b, uint64(volumes*(perVolume+4)+4096))
	return cluster, ns, volumes, perVolume
}

// idleWindow is how long the benchmark watches the idle manager
// (LONGHORN_BENCH_IDLE, a Go duration; one minute by default).
func idleWindow(b *testing.B) time.Duration {
	if s := os.Getenv("LONGHORN_BENCH_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("LONGHORN_BENCH_IDLE=%q: %v", s, err)
		}
		return d
	}
	return time.Minute
}

// BenchmarkSnapshotObjectsAtScale runs the manager as a child process on
// the real control plane with 1,000 attached volumes (1 MiB, one replica,
// no frontend), creates 30 Snapshot objects per volume with a plain
// client-go loop (round robin over the volumes, as a recurring job would)
// and reports:
//
//   - sync-s: from the first create until every object is in sync (its
//     volume label and finalizer set, the engine snapshot taken, and its
//     status the engine's entry, ready to use; see volumeInSync), and
//     listed-s, until every Engine status lists the snapshots as their
//     objects do (the API writes, engine calls and control-plane time
//     are counted until then);
//   - bare-create-s: the same loop creating the same objects in a
//     namespace no manager watches, and sync/bare, the ratio;
//   - idle API writes and engine calls per minute, over a quiet window
//     after the sync, and the snapshot reconciles in it;
//   - the daemon's peak RSS (VmHWM of the child process: its controllers,
//     informer caches and the 1,000 engines, which run inside it);
//   - reconciles, API writes and engine calls per snapshot while syncing,
//     and the manager's CPU seconds;
//   - a restart of the manager with everything in place: how long until
//     every engine runs again and the manager is quiet, against the bare
//     loop's rate, and its API writes other than the node's (the goal is
//     none).
func BenchmarkSnapshotObjectsAtScale(b *testing.B) {
	cluster, ns, volumes, perVolume := snapshotBenchNamespace(b)
	total := volumes * perVolume
	heapProfile := os.Getenv("LONGHORN_BENCH_HEAP_PROFILE")
	var profilerFlags []string
	if heapProfile != "" {
		profilerFlags = []string{"--profiler-address", framework.FreeAddress(b)}
	}
	d := framework.StartDaemonProcess(b, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, profilerFlags...)
	// The bare loop is the fastest a client can go: no client-side limit.
	unthrottled := rest.CopyConfig(cluster.Config)
	unthrottled.QPS, unthrottled.Burst = -1, 0
	admin := framework.LHClient(b, unthrottled)
	ctx := context.Background()

	names := attachScaleVolumes(b, d, admin, ns, volumes)

	watch := watchSync(b, admin, ns, total, perVolume)
	before := d.Metrics(b)
	cpBefore := cluster.CPUSeconds()
	profiled := profileControlPlane(b, cluster)
	b.ResetTimer()
	start := time.Now()
	createSnapshots(b, admin, ns, names, perVolume)
	created := time.Since(start)
	watch.wait(b, "after the first create")
	syncTime := time.Since(start)
	// The writes and the control plane's time are counted until the
	// Engine statuses list every snapshot too (their list is paced).
	watch.waitListed(b, "after the first create")
	listedTime := time.Since(start)
	cpSync := cluster.CPUSeconds() - cpBefore
	b.StopTimer()
	<-profiled
	after := d.Metrics(b)
	b.Logf("%d Snapshot objects created in %s, all in sync after %s, listed by every Engine status after %s (load %s)", total,
		created.Round(time.Millisecond), syncTime.Round(time.Millisecond), listedTime.Round(time.Millisecond), framework.LoadAverage())

	waitQuiet(b, d)
	window := idleWindow(b)
	idleBefore := d.Metrics(b)
	time.Sleep(window)
	idleAfter := d.Metrics(b)
	perMinute := func(v float64) float64 { return v * float64(time.Minute) / float64(window) }
	idleWrites := idleAfter.APIWrites() - idleBefore.APIWrites()
	// The node's heartbeat (its Lease) and disk probe (free space, which
	// other processes on the disk move) write at any scale.
	nodeWrites := func(s framework.Scrape) float64 {
		return s.APIWrites(`resource="leases"`) + s.APIWrites(`resource="nodes/status"`)
	}
	idleNodeWrites := nodeWrites(idleAfter) - nodeWrites(idleBefore)
	idleEngine := idleAfter.Sum("longhorn_manager_engine_calls_total") - idleBefore.Sum("longhorn_manager_engine_calls_total")
	idleSnapReconciles := idleAfter.Sum("longhorn_manager_reconcile_total", `controller="longhorn-snapshot"`) -
		idleBefore.Sum("longhorn_manager_reconcile_total", `controller="longhorn-snapshot"`)
	framework.LogDelta(b, "idle", idleBefore, idleAfter)
	framework.LogDelta(b, "sync", before, after)
	if heapProfile != "" {
		writeHeapProfile(b, profilerFlags[1], heapProfile)
	}
	peakRSS := d.ProcStatus(b, "VmHWM")
	// What the resident set is made of, from the Go runtime's own figures
	// (after the idle window, so a collection has run since the sync).
	mib := func(name string) float64 { return idleAfter.Sum(name) / (1 << 20) }
	b.Logf("memory after the idle window: RSS %.0f MiB (peak %.0f; anonymous %.0f, file-backed %.0f), Go heap in use %.0f MiB (live objects %.0f MiB, next collection at %.0f MiB), stacks %.0f MiB, all the runtime holds %.0f MiB",
		d.ProcStatus(b, "VmRSS")/1024, peakRSS/1024, d.ProcStatus(b, "RssAnon")/1024, d.ProcStatus(b, "RssFile")/1024, mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_alloc_bytes"),
		mib("go_memstats_next_gc_bytes"), mib("go_memstats_stack_inuse_bytes"), mib("go_memstats_sys_bytes"))
	fds := d.OpenFiles()

	verifyAgainstEngines(b, d, admin, ns, names, perVolume)

	// A restart with everything in place: the engines start again from
	// their replicas and every object is taken in again, which should
	// write nothing but the node's heartbeat and disk probe.
	start = time.Now()
	d.Restart(b)
	framework.Eventually(b, 30*time.Minute, "every engine running again", func() (bool, error) {
		return runningEngines(ctx, admin, ns) == volumes, nil
	})
	waitQuiet(b, d)
	restartTime := time.Since(start) - quietFor
	restarted := d.Metrics(b)
	framework.LogDelta(b, "restart", framework.Scrape{}, restarted)
	if n := watch.count(); n != total {
		b.Fatalf("after the restart %d of %d Snapshot objects in sync", n, total)
	}
	restartWrites := restarted.APIWrites() - nodeWrites(restarted)
	b.Logf("restart with %d objects in place: taken in after %s, %.0f API writes but the node's, %.0f snapshot reconciles (load %s)",
		total, restartTime.Round(time.Millisecond), restartWrites,
		restarted.Sum("longhorn_manager_reconcile_total", `controller="longhorn-snapshot"`), framework.LoadAverage())

	bareNS := cluster.NewPlainNamespace(b)
	cpBefore = cluster.CPUSeconds()
	start = time.Now()
	createSnapshots(b, admin, bareNS, names, perVolume)
	bare := time.Since(start)
	cpBare := cluster.CPUSeconds() - cpBefore
	b.Logf("bare client-go loop: %d objects in %s (load %s)", total, bare.Round(time.Millisecond), framework.LoadAverage())
	// The same loop where the mutating admission policies act (a
	// namespace labelled as the manager's, with no manager): what the
	// apiserver's policy costs each create, apart from the manager's
	// work. The objects keep their finalizer; the control plane goes
	// with the benchmark.
	admissionNS := cluster.NewNamespace(b)
	start = time.Now()
	createSnapshots(b, admin, admissionNS, names, perVolume)
	admission := time.Since(start)
	b.Logf("bare client-go loop under the admission policies: %d objects in %s (load %s)", total, admission.Round(time.Millisecond), framework.LoadAverage())

	during := func(family string, fragments ...string) float64 {
		return (after.Sum(family, fragments...) - before.Sum(family, fragments...)) / float64(total)
	}
	b.ReportMetric(float64(volumes), "volumes")
	b.ReportMetric(float64(total), "snapshots")
	b.ReportMetric(syncTime.Seconds(), "sync-s")
	b.ReportMetric(listedTime.Seconds(), "listed-s")
	b.ReportMetric(bare.Seconds(), "bare-create-s")
	b.ReportMetric(syncTime.Seconds()/bare.Seconds(), "sync/bare")
	b.ReportMetric(admission.Seconds(), "admission-create-s")
	// The control plane's processor time per object: what the apiserver
	// and etcd spent for each snapshot the manager synced, against each
	// bare create.
	b.ReportMetric(cpSync*1000/float64(total), "sync-controlplane-cpu-ms/snap")
	b.ReportMetric(cpBare*1000/float64(total), "bare-controlplane-cpu-ms/snap")
	b.ReportMetric(perMinute(idleWrites), "idle-api-writes/min")
	b.ReportMetric(perMinute(idleWrites-idleNodeWrites), "idle-api-writes-but-node/min")
	b.ReportMetric(perMinute(idleEngine), "idle-engine-calls/min")
	b.ReportMetric(perMinute(idleSnapReconciles), "idle-snapshot-reconciles/min")
	b.ReportMetric(after.Sum("process_cpu_seconds_total")-before.Sum("process_cpu_seconds_total"), "sync-manager-cpu-s")
	b.ReportMetric(restartTime.Seconds(), "restart-s")
	b.ReportMetric(bare.Seconds()/restartTime.Seconds(), "restart-rate/bare-rate")
	b.ReportMetric(restartWrites, "restart-api-writes-but-node")
	b.ReportMetric(peakRSS/1024, "peak-RSS-MiB")
	b.ReportMetric(float64(fds), "open-files")
	b.ReportMetric(during("longhorn_manager_reconcile_total", `controller="longhorn-snapshot"`), "snapshot-reconciles/snap")
	b.ReportMetric((after.APIWrites()-before.APIWrites())/float64(total), "api-writes/snap")
	b.ReportMetric(during("longhorn_manager_engine_calls_total"), "engine-calls/snap")
	b.ReportMetric(0, "ns/op")
}

// attachScaleVolumes creates volumes of 1 MiB with one replica through the
// daemon's API, attaches them without a frontend, waits until every engine
// runs and the daemon is quiet, and returns their names.
func attachScaleVolumes(b *testing.B, d *framework.DaemonProcess, client lhclientset.Interface, ns string, volumes int) []string {
	b.Helper()
	start := time.Now()
	names := make([]string, volumes)
	for i := range names {
		names[i] = fmt.Sprintf("vol-%04d", i)
	}
	framework.Parallel(b, 8, names, func(name string) error {
		if err := d.Post("/v1/volumes", fmt.Sprintf(`{"name":%q,"size":"1Mi","numberOfReplicas":1}`, name)); err != nil {
			return err
		}
		return d.Post("/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1","disableFrontend":true}`)
	})
	framework.Eventually(b, 30*time.Minute, "every volume attached", func() (bool, error) {
		return runningEngines(context.Background(), client, ns) == volumes, nil
	})
	b.Logf("%d volumes created and attached in %s", volumes, time.Since(start).Round(time.Second))
	waitQuiet(b, d)
	return names
}

// runningEngines counts the Engine objects that say running (0 when they
// cannot be listed).
func runningEngines(ctx context.Context, client lhclientset.Interface, ns string) int {
	list, err := client.LonghornV1beta2().Engines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	running := 0
	for _, e := range list.Items {
		if e.Status.CurrentState == longhorn.InstanceStateRunning {
			running++
		}
	}
	return running
}

// createSnapshots is the plain client-go loop: one Create per object, in
// turn over the volumes.
func createSnapshots(b *testing.B, client lhclientset.Interface, ns string, volumes []string, perVolume int) {
	b.Helper()
	api := client.LonghornV1beta2().Snapshots(ns)
	for j := 0; j < perVolume; j++ {
		for _, v := range volumes {
			s := &longhorn.Snapshot{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-s%02d", v, j)},
				Spec:       longhorn.SnapshotSpec{Volume: v, CreateSnapshot: true, Labels: map[string]string{"bench": "scale"}},
			}
			if _, err := api.Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
				b.Fatalf("create snapshot %s: %v", s.Name, err)
			}
		}
	}
}

// syncWatch follows Snapshots and Engines through an informer. done
// closes once every one of total Snapshot objects is in sync (see
// volumeInSync), listed once every Engine status also lists each
// snapshot as its object says (see listedInSync).
type syncWatch struct {
	mu        sync.Mutex
	byVolume  map[string]map[string]*longhorn.Snapshot
	engines   map[string]*longhorn.Engine
	inSync    map[string]bool
	inList    map[string]bool
	first     time.Time // when the first object came in sync
	total     int
	perVolume int
	done      chan struct{}
	listed    chan struct{}
}

func watchSync(b *testing.B, client lhclientset.Interface, ns string, total, perVolume int) *syncWatch {
	w := &syncWatch{byVolume: map[string]map[string]*longhorn.Snapshot{}, engines: map[string]*longhorn.Engine{},
		inSync: map[string]bool{}, inList: map[string]bool{}, total: total, perVolume: perVolume,
		done: make(chan struct{}), listed: make(chan struct{})}
	factory := lhinformers.NewSharedInformerFactoryWithOptions(client, 0, lhinformers.WithNamespace(ns))
	lh := factory.Longhorn().V1beta2()
	_, _ = lh.Snapshots().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.snapshot(obj.(*longhorn.Snapshot)) },
		UpdateFunc: func(_, obj any) { w.snapshot(obj.(*longhorn.Snapshot)) },
	})
	_, _ = lh.Engines().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.engine(obj.(*longhorn.Engine)) },
		UpdateFunc: func(_, obj any) { w.engine(obj.(*longhorn.Engine)) },
	})
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return w
}

func (w *syncWatch) snapshot(s *longhorn.Snapshot) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byVolume[s.Spec.Volume] == nil {
		w.byVolume[s.Spec.Volume] = map[string]*longhorn.Snapshot{}
	}
	w.byVolume[s.Spec.Volume][s.Name] = s
	w.check(s.Spec.Volume)
}

func (w *syncWatch) engine(e *longhorn.Engine) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.engines[e.Spec.VolumeName] = e
	w.check(e.Spec.VolumeName)
}

// check marks the volume's objects in sync, or not, and listed, or not.
func (w *syncWatch) check(volume string) {
	mark := func(set map[string]bool, name string, ok bool, ch chan struct{}) {
		if !ok {
			delete(set, name)
			return
		}
		set[name] = true
		if len(set) == w.total {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
	snaps := w.byVolume[volume]
	inSync := volumeInSync(snaps, w.perVolume)
	if inSync && w.first.IsZero() {
		w.first = time.Now()
	}
	for name, s := range snaps {
		mark(w.inSync, name, inSync, w.done)
		mark(w.inList, name, inSync && listedInSync(s, w.engines[volume]), w.listed)
	}
}

// wait waits until every object is in sync, and fails the benchmark after
// an hour (since what).
func (w *syncWatch) wait(b *testing.B, since string) {
	b.Helper()
	w.waitFor(b, w.done, w.inSync, "Snapshot objects in sync", since)
}

// waitListed waits until every Engine status lists its snapshots as their
// objects say.
func (w *syncWatch) waitListed(b *testing.B, since string) {
	b.Helper()
	w.waitFor(b, w.listed, w.inList, "Snapshot objects listed by their Engine", since)
}

// waitFor waits for ch, closed once set holds every object.
func (w *syncWatch) waitFor(b *testing.B, ch chan struct{}, set map[string]bool, what, since string) {
	b.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Minute):
		w.mu.Lock()
		n := len(set)
		w.mu.Unlock()
		b.Fatalf("only %d of %d %s an hour %s", n, w.total, what, since)
	}
}

// firstInSync is when the first object came in sync (zero before).
func (w *syncWatch) firstInSync() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

func (w *syncWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inSync)
}

// volumeInSync: the volume's perVolume objects are mutated and ready,
// with their labels, and their statuses make one chain of them, as the
// engine takes each volume's snapshots one after another: one object
// without a parent, each other's parent an object whose only child it is,
// and the last one's only child the volume head. That is the engine's
// chain whatever order the manager took them in; the engine's own
// entries are compared at the end (verifyAgainstEngines).
func volumeInSync(snaps map[string]*longhorn.Snapshot, perVolume int) bool {
	if len(snaps) != perVolume {
		return false
	}
	roots, heads := 0, 0
	for _, s := range snaps {
		st := s.Status
		if s.DeletionTimestamp != nil || s.Labels[types.LabelVolume] != s.Spec.Volume ||
			!slices.Contains(s.Finalizers, types.LonghornFinalizer) ||
			!st.ReadyToUse || st.Error != "" || st.CreationTime == "" || st.MarkRemoved || !st.UserCreated ||
			!maps.Equal(st.Labels, s.Spec.Labels) || len(st.Children) != 1 {
			return false
		}
		if st.Parent == "" {
			roots++
		} else if p := snaps[st.Parent]; p == nil || len(p.Status.Children) != 1 || !p.Status.Children[s.Name] {
			return false
		}
		for child := range st.Children {
			if child == "volume-head" {
				heads++
			} else if c := snaps[child]; c == nil || c.Status.Parent != s.Name {
				return false
			}
		}
	}
	return roots == 1 && heads == 1
}

// listedInSync: the Engine status lists the snapshot as its object's
// status says.
func listedInSync(s *longhorn.Snapshot, e *longhorn.Engine) bool {
	return e != nil && statusIsEntry(s.Status, e.Status.Snapshots[s.Name])
}

// statusIsEntry: a Snapshot status says what the engine's entry does.
func statusIsEntry(st longhorn.SnapshotStatus, info *longhorn.SnapshotInfo) bool {
	return info != nil && st.CreationTime == info.Created && st.Parent == info.Parent && maps.Equal(st.Children, info.Children) &&
		st.MarkRemoved == info.Removed && strconv.FormatInt(st.Size, 10) == info.Size && maps.Equal(st.Labels, info.Labels)
}

// verifyAgainstEngines asks each engine, through the manager's API, for
// its snapshots and compares each entry with its object's status.
func verifyAgainstEngines(b *testing.B, d *framework.DaemonProcess, client lhclientset.Interface, ns string, volumes []string, perVolume int) {
	b.Helper()
	list, err := client.LonghornV1beta2().Snapshots(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	objects := map[string]*longhorn.Snapshot{}
	for i := range list.Items {
		objects[list.Items[i].Name] = &list.Items[i]
	}
	framework.Parallel(b, 4, volumes, func(v string) error {
		var out struct {
			Data []longhorn.SnapshotInfo `json:"data"`
		}
		if err := d.PostJSON("/v1/volumes/"+v+"?action=snapshotList", "{}", &out); err != nil {
			return err
		}
		seen := 0
		for _, s := range out.Data {
			if s.Name == "volume-head" {
				continue
			}
			seen++
			o := objects[s.Name]
			if o == nil || o.Spec.Volume != v || !statusIsEntry(o.Status, &s) {
				return fmt.Errorf("volume %s: engine snapshot %+v has object %+v", v, s, o)
			}
		}
		if seen != perVolume {
			return fmt.Errorf("volume %s: the engine has %d snapshots, want %d", v, seen, perVolume)
		}
		return nil
	})
}

// quietFor is how long waitQuiet wants the daemon quiet.
const quietFor = 5 * time.Second

// waitQuiet waits until the daemon's workqueues are empty and it sent no
// write but its heartbeat for quietFor.
func waitQuiet(b *testing.B, d *framework.DaemonProcess) {
	b.Helper()
	last := d.Metrics(b)
	quiet := time.Now()
	framework.Eventually(b, 30*time.Minute, "the daemon quiet", func() (bool, error) {
		time.Sleep(time.Second)
		m := d.Metrics(b)
		writes := func(s framework.Scrape) float64 { return s.APIWrites() - s.APIWrites(`resource="leases"`) }
		if writes(m) != writes(last) || m.Sum("longhorn_manager_workqueue_depth") > 0 {
			last, quiet = m, time.Now()
		}
		return time.Since(quiet) >= quietFor, nil
	})
}

// profileControlPlane writes a CPU profile of the apiserver (and etcd, in
// the same process) to LONGHORN_BENCH_CONTROLPLANE_PROFILE, if set, for
// the first LONGHORN_BENCH_CONTROLPLANE_PROFILE_SECONDS (20 by default)
// of what follows, through the apiserver's /debug/pprof. The channel
// closes when the profile is written (at once when none is asked for).
func profileControlPlane(b *testing.B, cluster *testcluster.Cluster) <-chan struct{} {
	done := make(chan struct{})
	path := os.Getenv("LONGHORN_BENCH_CONTROLPLANE_PROFILE")
	if path == "" {
		close(done)
		return done
	}
	seconds := "20"
	if s := os.Getenv("LONGHORN_BENCH_CONTROLPLANE_PROFILE_SECONDS"); s != "" {
		seconds = s
	}
	client := cluster.KubeClient(b).CoreV1().RESTClient()
	go func() {
		defer close(done)
		data, err := client.Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).
			Timeout(10 * time.Minute).DoRaw(context.Background())
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			b.Errorf("control plane profile: %v", err)
		}
	}()
	return done
}

// writeHeapProfile saves the daemon's heap profile, from its
// --profiler-address, to path (LONGHORN_BENCH_HEAP_PROFILE: the daemon's
// heap after the idle window, for `go tool pprof`).
func writeHeapProfile(b *testing.B, profiler, path string) {
	b.Helper()
	resp, err := http.Get("http://" + profiler + "/debug/pprof/heap")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("heap profile: %d %v", resp.StatusCode, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
}
