package metrics

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

const testNode = "node-1"

// cachedCollector is a collector over informer caches filled with objs.
func cachedCollector(t testing.TB, now time.Time, objs ...any) *Collector {
	t.Helper()
	lh, kube := lhfake.NewSimpleClientset(), kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	ds := datastore.New("ns", lh, kube, inf)
	v := inf.Longhorn.Longhorn().V1beta2()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *longhorn.RecurringJob:
			err = v.RecurringJobs().Informer().GetIndexer().Add(o)
		case *longhorn.Volume:
			err = v.Volumes().Informer().GetIndexer().Add(o)
		case *longhorn.Snapshot:
			err = v.Snapshots().Informer().GetIndexer().Add(o)
		case *longhorn.Backup:
			err = v.Backups().Informer().GetIndexer().Add(o)
		case *longhorn.BackingImage:
			err = v.BackingImages().Informer().GetIndexer().Add(o)
		default:
			t.Fatalf("no cache for %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	return New(logrus.NewEntry(logger), ds, inf, testNode, clocktesting.NewFakeClock(now))
}

// gather is every series the collector serves, as name{label="v",...}.
func gather(t testing.TB, c *Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			var pairs []string
			for _, l := range m.Label {
				pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(pairs)
			out[f.GetName()+"{"+strings.Join(pairs, ",")+"}"] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func job(name string, task longhorn.RecurringJobType, cron string, groups ...string) *longhorn.RecurringJob {
	return &longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:   longhorn.RecurringJobSpec{Task: task, Cron: cron, Groups: groups},
		Status: longhorn.RecurringJobStatus{OwnerID: testNode}}
}

func volume(name, owner string, labels map[string]string) *longhorn.Volume {
	return &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Spec: longhorn.VolumeSpec{Size: 1 << 30}, Status: longhorn.VolumeStatus{OwnerID: owner}}
}

// TestCollectorSelectionAndOwnership: a volume is selected by a job's
// label or a group's (a disabled label selects nothing, a suspended backup
// job protects nothing), and only the objects this node owns are served;
// a full drill's scratch volume is none of the volumes'.
func TestCollectorSelectionAndOwnership(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	hourly := job("hourly", longhorn.RecurringJobTypeBackup, "0 * * * *", "gold")
	daily := job("daily", longhorn.RecurringJobTypeBackup, "0 2 * * *")
	paused := job("paused", longhorn.RecurringJobTypeBackup, "*/5 * * * *")
	paused.Spec.Suspend = true
	image := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu", Namespace: "ns"},
		Spec: longhorn.BackingImageSpec{MinNumberOfCopies: 3},
		Status: longhorn.BackingImageStatus{OwnerID: testNode, DiskFileStatusMap: map[string]*longhorn.BackingImageDiskFileStatus{
			"disk-a": {State: longhorn.BackingImageStateReady}, "disk-b": {State: longhorn.BackingImageStateReady},
			"disk-c": {State: longhorn.BackingImageStateInProgress}}}}
	c := cachedCollector(t, now, hourly, daily, paused, image,
		volume("gold-vol", testNode, map[string]string{types.RecurringJobGroupLabelKey("gold"): types.LabelValueEnabled,
			types.RecurringJobLabelKey("daily"): types.LabelValueEnabled}),
		volume("disabled-vol", testNode, map[string]string{types.RecurringJobLabelKey("daily"): "disabled",
			types.RecurringJobLabelKey("paused"): types.LabelValueEnabled}),
		volume("elsewhere", "node-2", map[string]string{types.RecurringJobLabelKey("daily"): types.LabelValueEnabled}),
		volume("drill-0123456789ab", testNode, map[string]string{types.LabelBackupVerifyScratch: "b1"}),
	)
	got := gather(t, c)
	expectSeries(t, got, map[string]float64{
		`longhorn_volume_backup_jobs{volume="gold-vol"}`:                                            2,
		`longhorn_volume_backup_interval_seconds{backup_target="default",volume="gold-vol"}`:        3600,
		`longhorn_volume_recurring_job{recurring_job="hourly",task="backup",volume="gold-vol"}`:     1,
		`longhorn_volume_recurring_job{recurring_job="daily",task="backup",volume="gold-vol"}`:      1,
		`longhorn_volume_backup_jobs{volume="disabled-vol"}`:                                        0,
		`longhorn_volume_recurring_job{recurring_job="paused",task="backup",volume="disabled-vol"}`: 1,
		`longhorn_recurring_job_interval_seconds{recurring_job="daily"}`:                            86400,
		`longhorn_backing_image_ready_copies{backing_image="ubuntu"}`:                               2,
		`longhorn_backing_image_min_copies{backing_image="ubuntu"}`:                                 3,
		`longhorn_volume_last_backup_timestamp_seconds{backup_target="default",volume="gold-vol"}`:  0,
		`longhorn_recurring_job_runs_finished_total{recurring_job="hourly",result="forbidden"}`:     0,
		`longhorn_volume_robustness{robustness="healthy",volume="gold-vol"}`:                        0,
		`longhorn_recurring_job_run_duration_seconds{recurring_job="hourly"}`:                       0,
		`longhorn_recurring_job_suspended{recurring_job="paused"}`:                                  1,
		`longhorn_recurring_job_info{cron="0 2 * * *",recurring_job="daily",task="backup"}`:         1,
		`longhorn_recurring_job_last_run_failed{recurring_job="daily"}`:                             0,
		`longhorn_recurring_job_last_success_timestamp_seconds{recurring_job="daily"}`:              0,
		`longhorn_volume_snapshots{volume="gold-vol"}`:                                              0,
		`longhorn_volume_created_timestamp_seconds{volume="gold-vol"}`:                              0,
		`longhorn_volume_state{state="attached",volume="gold-vol"}`:                                 0,
		`longhorn_recurring_job_runs_started_total{recurring_job="daily"}`:                          0,
		`longhorn_recurring_job_active_runs{recurring_job="daily"}`:                                 0,
		`longhorn_recurring_job_ready{recurring_job="daily"}`:                                       0,
		`longhorn_volume_size_bytes{volume="gold-vol"}`:                                             1 << 30,
		`longhorn_volume_last_snapshot_timestamp_seconds{volume="gold-vol"}`:                        0,
		`longhorn_volume_snapshot_bytes{volume="gold-vol"}`:                                         0,
		`longhorn_recurring_job_last_run_timestamp_seconds{recurring_job="daily"}`:                  0,
		`longhorn_volume_robustness{robustness="unknown",volume="gold-vol"}`:                        0,
		`longhorn_recurring_job_runs_finished_total{recurring_job="daily",result="succeeded"}`:      0,
		`longhorn_volume_recurring_job{recurring_job="daily",task="backup",volume="disabled-vol"}`:  -1, // absent
		`longhorn_volume_backup_interval_seconds{backup_target="default",volume="disabled-vol"}`:    -1,
		`longhorn_volume_backup_jobs{volume="elsewhere"}`:                                           -1,
		`longhorn_volume_backup_jobs{volume="drill-0123456789ab"}`:                                  -1, // a drill's scratch volume
		`longhorn_volume_size_bytes{volume="drill-0123456789ab"}`:                                   -1,
		`longhorn_recurring_job_next_run_timestamp_seconds{recurring_job="paused"}`:                 -1,
	})
}

// expectSeries checks the series gathered against want: each at its
// value, or absent where want has -1.
func expectSeries(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for s, v := range want {
		g, ok := got[s]
		switch {
		case v < 0 && ok:
			t.Errorf("%s served, want it absent", s)
		case v >= 0 && !ok:
			t.Errorf("%s missing", s)
		case v >= 0 && g != v:
			t.Errorf("%s = %v, want %v", s, g, v)
		}
	}
}

// BenchmarkScrape: one scrape of a node owning 1,000 volumes of 30
// snapshots and 1,000 backups, with 100 jobs, against the baseline of
// reading those objects from the cache, which any scrape must do.
func BenchmarkScrape(b *testing.B) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	var objs []any
	for j := 0; j < 100; j++ {
		objs = append(objs, job(fmt.Sprintf("job-%d", j), longhorn.RecurringJobTypeBackup, "0 * * * *", fmt.Sprintf("group-%d", j%10)))
	}
	for v := 0; v < 1000; v++ {
		name := fmt.Sprintf("vol-%d", v)
		objs = append(objs, volume(name, testNode, map[string]string{
			types.RecurringJobGroupLabelKey(fmt.Sprintf("group-%d", v%10)): types.LabelValueEnabled,
			types.RecurringJobLabelKey(fmt.Sprintf("job-%d", v%100)):       types.LabelValueEnabled,
		}))
		for s := 0; s < 30; s++ {
			objs = append(objs, &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-s%d", name, s), Namespace: "ns",
				Labels: map[string]string{types.LabelVolume: name}},
				Status: longhorn.SnapshotStatus{Size: 1 << 20, CreationTime: now.Add(-time.Duration(s) * time.Hour).Format(time.RFC3339)}})
		}
		objs = append(objs, &longhorn.Backup{ObjectMeta: metav1.ObjectMeta{Name: "backup-" + name, Namespace: "ns",
			Labels: map[string]string{types.LabelBackupVolume: name}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: longhorn.BackupStatus{OwnerID: testNode, State: longhorn.BackupStateCompleted, VolumeName: name, Size: "1048576",
				BackupCreatedAt: now.Add(-50 * time.Minute).Format(time.RFC3339Nano)}})
	}
	c := cachedCollector(b, now, objs...)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	b.Run("baseline-cache-reads", func(b *testing.B) {
		for b.Loop() {
			vols, _ := c.ds.ListVolumesRO(labels.Everything())
			for _, v := range vols {
				_, _ = c.ds.ListVolumeSnapshotsRO(v.Name)
			}
			_, _ = c.ds.ListRecurringJobsRO()
			_, _ = c.ds.ListBackupsRO("")
			_, _ = c.ds.ListBackingImagesRO()
		}
	})
	b.Run("scrape", func(b *testing.B) {
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScrapeJobs: one scrape of a manager with 2,000 recurring jobs
// and nothing else, the per-job part of a scrape.
func BenchmarkScrapeJobs(b *testing.B) {
	now := time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)
	var objs []any
	for j := 0; j < 2000; j++ {
		objs = append(objs, job(fmt.Sprintf("job-%05d", j), longhorn.RecurringJobTypeSnapshot, "0 0 1 1 *", ""))
	}
	c := cachedCollector(b, now, objs...)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
