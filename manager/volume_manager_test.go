package manager

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/testtime"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// newManager returns a VolumeManager on a datastore whose informers run
// against the real control plane, in a fresh namespace.
func newManager(t *testing.T) (*VolumeManager, lhclientset.Interface, string) {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	lh, err := lhclientset.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	inf := datastore.NewInformers(lh, kube, ns, 0)
	ds := datastore.New(ns, lh, kube, inf)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); inf.Shutdown() })
	inf.Start(ctx.Done())
	if err := ds.WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	return NewVolumeManager(ds), lh, ns
}

func waitCached(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, testtime.Scale(10*time.Second), true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestVolumeManagerRecurringJobSelection(t *testing.T) {
	m, lh, ns := newManager(t)
	ctx := context.Background()
	if _, err := lh.LonghornV1beta2().RecurringJobs(ns).Create(ctx, &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec:       longhorn.RecurringJobSpec{Task: "backup", Cron: "@daily", Retain: 3},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCached(t, "job cached", func() bool { _, err := m.ds.GetRecurringJobRO("nightly"); return err == nil })

	spec := longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 3}
	selector, err := datastore.ParseRecurringJobSelector(`[{"name":"nightly"},{"name":"gold","isGroup":true}]`)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.CreateVolume(ctx, "db", spec, selector, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"recurring-job.longhorn.io/nightly": "enabled", "recurring-job-group.longhorn.io/gold": "enabled"}
	if !reflect.DeepEqual(v.Labels, want) {
		t.Fatalf("labels %v, want %v", v.Labels, want)
	}

	plain, err := m.CreateVolume(ctx, "scratch", spec, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Labels["recurring-job-group.longhorn.io/default"] != "enabled" {
		t.Fatalf("a volume created without a selector is not in the default group: %v", plain.Labels)
	}

	_, err = m.CreateVolume(ctx, "bad", spec, []datastore.RecurringJobSelectorItem{{Name: "no-such-job"}}, "")
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "recurringJobSelector[0]") {
		t.Fatalf("selecting a missing job at create: %v", err)
	}
	if _, err := m.CreateVolume(ctx, "Bad_Name", spec, nil, ""); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "name:") {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := m.CreateVolume(ctx, "db", spec, nil, ""); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate name: %v", err)
	}

	// Adding to a default-group volume replaces the default group.
	got, err := m.AddVolumeRecurringJob(ctx, "scratch", datastore.RecurringJobSelectorItem{Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []datastore.RecurringJobSelectorItem{{Name: "nightly"}}) {
		t.Fatalf("after add: %v", got)
	}
	// A group no job lists yet may be added; a missing job may not.
	if _, err := m.AddVolumeRecurringJob(ctx, "scratch", datastore.RecurringJobSelectorItem{Name: "silver", IsGroup: true}); err != nil {
		t.Fatalf("adding a group before any job lists it: %v", err)
	}
	if _, err := m.AddVolumeRecurringJob(ctx, "scratch", datastore.RecurringJobSelectorItem{Name: "missing"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("adding a missing job: %v", err)
	}
	if _, err := m.AddVolumeRecurringJob(ctx, "no-volume", datastore.RecurringJobSelectorItem{Name: "nightly"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("adding to a missing volume: %v", err)
	}

	if _, err := m.DeleteVolumeRecurringJob(ctx, "scratch", datastore.RecurringJobSelectorItem{Name: "silver", IsGroup: true}); err != nil {
		t.Fatal(err)
	}
	got, err = m.DeleteVolumeRecurringJob(ctx, "scratch", datastore.RecurringJobSelectorItem{Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []datastore.RecurringJobSelectorItem{{Name: "default", IsGroup: true}}) {
		t.Fatalf("a volume that selects nothing is back in the default group: %v", got)
	}
	waitCached(t, "list from the cache", func() bool {
		list, err := m.ListVolumeRecurringJobs(context.Background(), "db")
		return err == nil && reflect.DeepEqual(list, []datastore.RecurringJobSelectorItem{{Name: "gold", IsGroup: true}, {Name: "nightly"}})
	})
}
