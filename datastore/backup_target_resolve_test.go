package datastore

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestTargetForURL: a backup URL belongs to the target whose URL names
// its place, however written; of two at one place, to the one made
// first, which holds it (the backup target controller refuses the
// other), default or not.
func TestTargetForURL(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	target := func(name, url string, created time.Time) *longhorn.BackupTarget {
		return &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(created)},
			Spec: longhorn.BackupTargetSpec{BackupTargetURL: url}}
	}
	for _, tc := range []struct {
		name    string
		setting string // default's URL
		targets []*longhorn.BackupTarget
		url     string
		want    string
	}{
		{"default's folder, written another way", "file:///backups", []*longhorn.BackupTarget{target("default", "file:///backups", t0)},
			"file://localhost/backups/?backup=b-1&volume=vol", "default"},
		{"offsite's bucket, in another region", "file:///backups", []*longhorn.BackupTarget{target("default", "file:///backups", t0), target("offsite", "s3://bkt@us-east-1/lh", t0)},
			"s3://bkt@eu-west-1/lh?backup=b-1&volume=vol", "offsite"},
		{"shared: offsite, made before default's URL was set there", "file:///x", []*longhorn.BackupTarget{target("default", "file:///x", t0.Add(time.Hour)), target("offsite", "file:///x/", t0)},
			"file:///x?backup=b-1&volume=vol", "offsite"},
		{"shared: default, made first", "file:///x", []*longhorn.BackupTarget{target("default", "file:///x", t0), target("offsite", "file:///x/", t0.Add(time.Hour))},
			"file:///x?backup=b-1&volume=vol", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset()
			kube := fake.NewSimpleClientset()
			inf := NewInformers(lh, kube, "ns", 0)
			ds := New("ns", lh, kube, inf)
			lhi := inf.Longhorn.Longhorn().V1beta2()
			if err := lhi.Settings().Informer().GetIndexer().Add(&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupTarget), Namespace: "ns"}, Value: tc.setting}); err != nil {
				t.Fatal(err)
			}
			for _, bt := range tc.targets {
				if err := lhi.BackupTargets().Informer().GetIndexer().Add(bt); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ds.TargetForURL(tc.url)
			if err != nil || got.Name != tc.want {
				t.Errorf("TargetForURL(%q) = %q, %v; want %q", tc.url, got.Name, err, tc.want)
			}
		})
	}
}
