package backup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func TestDefaultTargetStatus(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	for _, tc := range []struct {
		name         string
		cur          longhorn.BackupTargetStatus
		target       string
		pollErr      error
		available    bool
		lastSyncedAt metav1.Time
		unavailable  longhorn.ConditionStatus
		messageHas   string
	}{
		{name: "a poll that read the target: available, synced now, Unavailable False",
			cur: longhorn.BackupTargetStatus{OwnerID: "node-2"}, target: "file:///b", available: true, lastSyncedAt: metav1.NewTime(now), unavailable: longhorn.ConditionStatusFalse},
		{name: "a poll that could not read it: unavailable with the reason, the last sync kept",
			cur: longhorn.BackupTargetStatus{Available: true, LastSyncedAt: earlier}, target: "s3://b@r/", pollErr: errors.New("access denied"),
			lastSyncedAt: earlier, unavailable: longhorn.ConditionStatusTrue, messageHas: "cannot read s3://b@r/: access denied"},
		{name: "no target set: unavailable, never synced, as Longhorn's",
			cur: longhorn.BackupTargetStatus{Available: true, LastSyncedAt: earlier}, target: "",
			unavailable: longhorn.ConditionStatusTrue, messageHas: "backup target URL is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := defaultTargetStatus(tc.cur, tc.target, tc.pollErr, now)
			if got.Available != tc.available || !got.LastSyncedAt.Equal(&tc.lastSyncedAt) || got.OwnerID != tc.cur.OwnerID {
				t.Errorf("status %+v", got)
			}
			c := kit.GetCondition(got.Conditions, longhorn.BackupTargetConditionTypeUnavailable)
			if c.Status != tc.unavailable || !strings.Contains(c.Message, tc.messageHas) {
				t.Errorf("Unavailable condition %+v", c)
			}
		})
	}
}

func defaultTarget(url string) *longhorn.BackupTarget {
	return &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns"},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: url}, Status: longhorn.BackupTargetStatus{OwnerID: "node-1"}}
}

// putTarget stores bt in the fixture's clientset and cache.
func putTarget(t *testing.T, f *fixture, bt *longhorn.BackupTarget) {
	t.Helper()
	if _, err := f.lh.LonghornV1beta2().BackupTargets("ns").Update(context.Background(), bt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cache(t, bt)
}

// TestAPollWritesDefaultsStatus: the poll's result reaches default's
// status, in one status write after the poll's own, and nothing else of
// default is written.
func TestAPollWritesDefaultsStatus(t *testing.T) {
	t.Run("a target the poll reads", func(t *testing.T) {
		f := newFixture(t, nil)
		putTarget(t, f, defaultTarget("file://"+f.root))
		f.lh.ClearActions()
		if _, err := f.c.sync(context.Background(), f.c.key()); err != nil {
			t.Fatal(err)
		}
		if got := append(lhWrites(f.lh.Actions()), targetWrites(f.lh.Actions())...); !slices.Equal(got, []string{"update backuptargets/status default"}) {
			t.Fatalf("writes %v", got)
		}
		got, err := f.lh.LonghornV1beta2().BackupTargets("ns").Get(context.Background(), "default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Status.Available || !got.Status.LastSyncedAt.Time.Equal(f.now) || got.Status.OwnerID != "node-1" {
			t.Errorf("status %+v", got.Status)
		}
	})
	t.Run("a target the poll cannot read", func(t *testing.T) {
		f := newFixtureAt(t, "s3://backups@us-east-1/", nil,
			&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupTargetCredentialSecret), Namespace: "ns"}, Value: "missing-secret"})
		bt := defaultTarget("s3://backups@us-east-1/")
		bt.Status.Available = true
		putTarget(t, f, bt)
		if _, err := f.c.sync(context.Background(), f.c.key()); err != nil {
			t.Fatal(err)
		}
		got, err := f.lh.LonghornV1beta2().BackupTargets("ns").Get(context.Background(), "default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := kit.GetCondition(got.Status.Conditions, longhorn.BackupTargetConditionTypeUnavailable)
		if got.Status.Available || c.Status != longhorn.ConditionStatusTrue || !strings.Contains(c.Message, "missing-secret") {
			t.Errorf("status %+v", got.Status)
		}
	})
	t.Run("no default: the poll writes nothing of it", func(t *testing.T) {
		f := newFixture(t, nil)
		if err := f.inf.Longhorn.Longhorn().V1beta2().BackupTargets().Informer().GetIndexer().Delete(defaultTarget("")); err != nil {
			t.Fatal(err)
		}
		f.lh.ClearActions()
		if _, err := f.c.sync(context.Background(), f.c.key()); err != nil {
			t.Fatal(err)
		}
		for _, w := range allWrites(f.lh.Actions()) {
			if strings.Contains(w, "backuptargets") {
				t.Errorf("wrote %s", w)
			}
		}
	})
}
