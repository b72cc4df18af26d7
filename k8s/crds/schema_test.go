package crds_test

import (
	"context"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/cadence-storage/longhorn-manager/k8s/crds"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

func client(t *testing.T) lhclientset.Interface {
	t.Helper()
	c, err := lhclientset.NewForConfig(testcluster.Get(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func recurringJob(name string, spec longhorn.RecurringJobSpec) *longhorn.RecurringJob {
	return &longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// wantRefused asserts that err is the apiserver refusing the object and
// that its message names every fragment (the field and the rule).
func wantRefused(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the apiserver accepted an object it should refuse (want %q)", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not say %q", err, f)
		}
	}
}

func TestRecurringJobSchemaRefusesBadInput(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	jobs := client(t).LonghornV1beta2().RecurringJobs(ns)
	ctx := context.Background()
	valid := longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 * * * *", Retain: 3}

	cases := []struct {
		name      string
		job       *longhorn.RecurringJob
		fragments []string
	}{
		{"unknown task", recurringJob("bad-task", longhorn.RecurringJobSpec{Task: "snapshot-everything", Cron: "* * * * *"}),
			[]string{"spec.task", "Unsupported value"}},
		{"negative retain", recurringJob("neg-retain", longhorn.RecurringJobSpec{Task: "snapshot", Cron: "* * * * *", Retain: -1}),
			[]string{"spec.retain", "greater than or equal to 0"}},
		{"zero concurrency", recurringJob("zero-conc", longhorn.RecurringJobSpec{Task: "snapshot", Cron: "* * * * *", Concurrency: -2}),
			[]string{"spec.concurrency", "greater than or equal to 1"}},
		{"missing cron", recurringJob("no-cron", longhorn.RecurringJobSpec{Task: "snapshot"}),
			[]string{"spec.cron"}},
		{"spec name breaking its pattern", recurringJob("upper", longhorn.RecurringJobSpec{Name: "Upper", Task: "snapshot", Cron: "* * * * *"}),
			[]string{"spec.name", "should match"}},
		{"spec name differing from the object name", recurringJob("one", longhorn.RecurringJobSpec{Name: "two", Task: "snapshot", Cron: "* * * * *"}),
			[]string{"spec.name must equal metadata.name"}},
		{"object name longer than 40 characters", recurringJob(strings.Repeat("a", 41), valid),
			[]string{"metadata.name must be at most 40 characters"}},
		{"group that is no label name", recurringJob("bad-group", longhorn.RecurringJobSpec{Task: "snapshot", Cron: "* * * * *", Groups: []string{"not/a/group"}}),
			[]string{"spec.groups[0]", "should match"}},
		{"label key that is no label key", recurringJob("bad-label", longhorn.RecurringJobSpec{Task: "snapshot", Cron: "* * * * *", Labels: map[string]string{"a b": "c"}}),
			[]string{"spec.labels", "valid Kubernetes label keys"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := jobs.Create(ctx, c.job, metav1.CreateOptions{})
			wantRefused(t, err, c.fragments...)
		})
	}
}

func TestRecurringJobDefaultsAndImmutableTask(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	jobs := client(t).LonghornV1beta2().RecurringJobs(ns)
	ctx := context.Background()

	created, err := jobs.Create(ctx, recurringJob("hourly", longhorn.RecurringJobSpec{
		Name: "hourly", Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 * * * *", Retain: 5, Groups: []string{"default"},
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Concurrency != 10 {
		t.Errorf("concurrency defaulted to %d, want 10", created.Spec.Concurrency)
	}
	created.Spec.Task = longhorn.RecurringJobTypeBackup
	_, err = jobs.Update(ctx, created, metav1.UpdateOptions{})
	wantRefused(t, err, "spec.task", "task is immutable")
}

func TestVolumeAndSnapshotSchemas(t *testing.T) {
	cluster := testcluster.Get(t)
	// No manager runs here to release the finalizer the manager
	// namespace's admission policy gives a Snapshot.
	ns := cluster.NewPlainNamespace(t)
	lh := client(t).LonghornV1beta2()
	ctx := context.Background()

	_, err := lh.Volumes(ns).Create(ctx, &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "no-replicas"},
		Spec:       longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 0, Frontend: longhorn.VolumeFrontendBlockDev},
	}, metav1.CreateOptions{})
	// numberOfReplicas is sent even when 0 (no omitempty), so it is checked.
	wantRefused(t, err, "spec.numberOfReplicas", "greater than or equal to 1")

	_, err = lh.Volumes(ns).Create(ctx, &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "negative"},
		Spec:       longhorn.VolumeSpec{Size: -5, NumberOfReplicas: 3},
	}, metav1.CreateOptions{})
	wantRefused(t, err, "spec.size", "should match")

	vol, err := lh.Volumes(ns).Create(ctx, &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "vol"},
		Spec:       longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 3, BackingImage: "ubuntu"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vol.Spec.AccessMode != longhorn.AccessModeReadWriteOnce {
		t.Errorf("accessMode defaulted to %q, want rwo", vol.Spec.AccessMode)
	}
	vol.Spec.BackingImage = "debian"
	_, err = lh.Volumes(ns).Update(ctx, vol, metav1.UpdateOptions{})
	wantRefused(t, err, "backingImage is immutable")

	// spec.size grows, never shrinks.
	vol, err = lh.Volumes(ns).Get(ctx, "vol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vol.Spec.Size = 1 << 29
	_, err = lh.Volumes(ns).Update(ctx, vol, metav1.UpdateOptions{})
	wantRefused(t, err, "size: a volume never shrinks")
	vol.Spec.Size = 2 << 30
	if _, err := lh.Volumes(ns).Update(ctx, vol, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("growing spec.size: %v", err)
	}

	snap, err := lh.Snapshots(ns).Create(ctx, &longhorn.Snapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap"},
		Spec:       longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true, Labels: map[string]string{"a": "b"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap.Spec.Volume = "other"
	_, err = lh.Snapshots(ns).Update(ctx, snap, metav1.UpdateOptions{})
	wantRefused(t, err, "spec.volume", "volume is immutable")

	_, err = lh.Snapshots(ns).Create(ctx, &longhorn.Snapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Spec:       longhorn.SnapshotSpec{CreateSnapshot: true},
	}, metav1.CreateOptions{})
	wantRefused(t, err, "spec.volume")
}

func TestEveryResourceHasItsShortNameAndTheLonghornCategory(t *testing.T) {
	want := map[string]string{
		"settings": "lhs", "nodes": "lhn", "volumes": "lhv", "engines": "lhe", "replicas": "lhr",
		"snapshots": "lhsnap", "backups": "lhb", "backupvolumes": "lhbv", "backuptargets": "lhbt", "recurringjobs": "lhrj",
		"backingimages": "lhbi", "backingimagedatasources": "lhbids", "backingimagemanagers": "lhbim", "instancemanagers": "lhim",
		"systembackups": "lhsb", "systemrestores": "lhsr",
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Errorf("%d CRDs, want %d", len(all), len(want))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(testcluster.Get(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion("longhorn.io/v1beta2")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range list.APIResources {
		if strings.Contains(r.Name, "/") {
			if !strings.HasSuffix(r.Name, "/status") {
				t.Errorf("unexpected subresource %s", r.Name)
			}
			continue
		}
		seen[r.Name] = true
		short, ok := want[r.Name]
		if !ok {
			t.Errorf("unexpected resource %s", r.Name)
			continue
		}
		if len(r.ShortNames) != 1 || r.ShortNames[0] != short {
			t.Errorf("%s short names %v, want [%s]", r.Name, r.ShortNames, short)
		}
		if len(r.Categories) != 1 || r.Categories[0] != "longhorn" {
			t.Errorf("%s categories %v, want [longhorn]", r.Name, r.Categories)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("resource %s is not served", name)
		}
	}
}

func TestKubectlGetLonghornShowsPrinterColumns(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	if _, err := client(t).LonghornV1beta2().RecurringJobs(ns).Create(context.Background(), recurringJob("daily-backup", longhorn.RecurringJobSpec{
		Task: longhorn.RecurringJobTypeBackup, Cron: "@daily", Retain: 7, Groups: []string{"gold"},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		return cluster.Kubectl(t, "", append([]string{"-n", ns}, args...)...)
	}
	byCategory := run("get", "longhorn")
	if !strings.Contains(byCategory, "recurringjob.longhorn.io/daily-backup") {
		t.Errorf("kubectl get longhorn does not list the job:\n%s", byCategory)
	}
	table := run("get", "lhrj")
	for _, col := range []string{"GROUPS", "TASK", "CRON", "RETAIN", "CONCURRENCY", "AGE", "LABELS", "backup", "@daily", "gold"} {
		if !strings.Contains(table, col) {
			t.Errorf("kubectl get lhrj lacks %q:\n%s", col, table)
		}
	}
}
