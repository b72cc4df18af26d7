package systembackup

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestRestoredTargets: a restore makes none of the archive's targets
// whose name the cluster has, nor one at a place another target keeps
// its backups, however its URL is written, the cluster's or one the
// restore makes.
func TestRestoredTargets(t *testing.T) {
	have := []datastore.Target{{Name: "default", URL: "file:///backups"}, {Name: "offsite", URL: "s3://bkt@us-east-1/lh"}}
	target := func(name, url string) longhorn.BackupTarget {
		return longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: longhorn.BackupTargetSpec{BackupTargetURL: url}}
	}
	for _, tc := range []struct {
		name    string
		archive []longhorn.BackupTarget
		made    []string
		kept    int
	}{
		{"a new place is made", []longhorn.BackupTarget{target("far", "file:///far")}, []string{"far"}, 0},
		{"a name the cluster has is kept", []longhorn.BackupTarget{target("offsite", "file:///elsewhere")}, nil, 1},
		{"default's folder, written another way", []longhorn.BackupTarget{target("old", "file://localhost/backups/")}, nil, 1},
		{"offsite's bucket and prefix, in another region", []longhorn.BackupTarget{target("old", "s3://bkt@eu-west-1/lh/")}, nil, 1},
		{"two of the archive's at one place: the first is made", []longhorn.BackupTarget{target("a", "file:///far"), target("b", "file:///far/")}, []string{"a"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			made, kept, err := restoredTargets(have, func(name string) (bool, error) {
				return slices.ContainsFunc(have, func(t datastore.Target) bool { return t.Name == name }), nil
			}, tc.archive)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, bt := range made {
				names = append(names, bt.Name)
			}
			if !slices.Equal(names, tc.made) || kept != tc.kept {
				t.Errorf("made %v, kept %d; want %v, %d", names, kept, tc.made, tc.kept)
			}
		})
	}
}
