//go:build e2e

package snapshot

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// BenchmarkSnapshotStartUp measures the manager taking in Snapshot objects
// created while no manager ran (a manager upgraded or down while a backup
// tool or a user kept creating them): with the volumes attached, the
// daemon stops, a plain client-go loop creates the objects in its
// namespace (the admission policies give each its label and finalizer),
// and the daemon starts again and is timed until every object is in sync
// (engine snapshot taken, status the engine's entry). The same loop in a
// namespace no manager watches, before and after, is the baseline:
// startup-rate/bare-rate is the rate the objects are taken in at against
// the bare creates' (the goal: at least 0.5). Its size is the
// snapshot benchmark's (LONGHORN_BENCH_SNAPSHOT_SCALE); the manager's
// client-side limit is raised to 2,000 requests a second.
func BenchmarkSnapshotStartUp(b *testing.B) {
	cluster, ns, volumes, perVolume := snapshotBenchNamespace(b)
	total := volumes * perVolume
	// As in the recurring job benchmark, the manager's client-side limit
	// is raised (the default, 200 requests a second, would bound a
	// start-up that writes one status a snapshot), so that the apiserver
	// is what is measured.
	d := framework.StartDaemonProcess(b, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "--kube-api-qps", "2000", "--kube-api-burst", "4000")
	unthrottled := rest.CopyConfig(cluster.Config)
	unthrottled.QPS, unthrottled.Burst = -1, 0
	admin := framework.LHClient(b, unthrottled)
	names := attachScaleVolumes(b, d, admin, ns, volumes)

	bareLoop := func() time.Duration {
		bareNS := cluster.NewPlainNamespace(b)
		start := time.Now()
		createSnapshots(b, admin, bareNS, names, perVolume)
		bare := time.Since(start)
		b.Logf("bare client-go loop: %d objects in %s (load %s)", total, bare.Round(time.Millisecond), framework.LoadAverage())
		return bare
	}
	bareBefore := bareLoop()

	d.Stop(b)
	watch := watchSync(b, admin, ns, total, perVolume)
	start := time.Now()
	createSnapshots(b, admin, ns, names, perVolume)
	created := time.Since(start)
	b.Logf("%d objects created while no manager runs in %s (load %s)", total, created.Round(time.Millisecond), framework.LoadAverage())

	b.ResetTimer()
	cpBefore := cluster.CPUSeconds()
	start = time.Now()
	d.Launch(b, "daemon-started.log")
	ready := time.Since(start)
	watch.wait(b, "after the manager's start")
	takeIn := time.Since(start)
	watch.waitListed(b, "after the manager's start")
	listed := time.Since(start)
	cpTakeIn := cluster.CPUSeconds() - cpBefore
	b.StopTimer()
	m := d.Metrics(b)
	framework.LogDelta(b, "start-up", framework.Scrape{}, m)
	b.Logf("start-up: %d objects taken in after %s, listed by every Engine status after %s: the manager ready after %s, the first object in sync after %s (load %s)", total,
		takeIn.Round(time.Millisecond), listed.Round(time.Millisecond), ready.Round(time.Millisecond), watch.firstInSync().Sub(start).Round(time.Millisecond), framework.LoadAverage())

	bareAfter := bareLoop()
	bare := (bareBefore + bareAfter) / 2
	nodeWrites := m.APIWrites(`resource="leases"`) + m.APIWrites(`resource="nodes/status"`)
	b.ReportMetric(float64(total), "snapshots")
	b.ReportMetric(takeIn.Seconds(), "startup-s")
	b.ReportMetric(listed.Seconds(), "listed-s")
	b.ReportMetric(bare.Seconds(), "bare-create-s")
	b.ReportMetric(created.Seconds(), "admission-create-s")
	b.ReportMetric(bare.Seconds()/takeIn.Seconds(), "startup-rate/bare-rate")
	b.ReportMetric((m.APIWrites()-nodeWrites)/float64(total), "api-writes/snap")
	b.ReportMetric(m.Sum("longhorn_manager_engine_calls_total")/float64(total), "engine-calls/snap")
	b.ReportMetric(cpTakeIn*1000/float64(total), "startup-controlplane-cpu-ms/snap")
	b.ReportMetric(m.Sum("process_cpu_seconds_total"), "startup-manager-cpu-s")
	b.ReportMetric(d.ProcStatus(b, "VmHWM")/1024, "peak-RSS-MiB")
	b.ReportMetric(0, "ns/op")
}
