package volume

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/cadence-storage/longhorn-manager/types"
)

func TestAFailedCloneWaitsLongerEachTime(t *testing.T) {
	for attempts, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 8: 256 * time.Second, 9: 5 * time.Minute, 100: 5 * time.Minute} {
		if got := cloneBackoff(attempts); got != want {
			t.Errorf("after %d failures: %s, want %s", attempts, got, want)
		}
	}
}

// The snapshot a vol:// clone takes is the same for a retried or
// restarted clone, another for another clone (a new volume of the same
// name included), and a name the engine and a snap:// data source take.
func TestAVolumeClonesSnapshotIsNamedAfterBothVolumes(t *testing.T) {
	vol := func(name, uid string) *longhorn.Volume {
		return &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
	}
	src, clone := vol("src", "0b6c1d1e-1111"), vol("copy", "5d2e7f00-2222")
	name := cloneSnapshotName(src, clone)
	if again := cloneSnapshotName(vol("src", "0b6c1d1e-1111"), vol("copy", "5d2e7f00-2222")); again != name {
		t.Errorf("the same clone: %s, then %s", name, again)
	}
	if other := cloneSnapshotName(src, vol("copy", "9a9a9a9a-3333")); other == name {
		t.Errorf("a new volume of the same name took the old one's snapshot %s", name)
	}
	if _, err := lhtypes.ParseDataSource("snap://src/" + name); err != nil || len(name) > 63 {
		t.Errorf("snapshot name %q: %v", name, err)
	}
}
