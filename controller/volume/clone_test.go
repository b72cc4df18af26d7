package volume

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhtypes "github.com/cadence-storage/longhorn-manager/types"
	"github.com/sirupsen/logrus"
)

func TestAFailedCloneWaitsLongerEachTime(t *testing.T) {
	for attempts, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 8: 256 * time.Second, 9: 5 * time.Minute, 100: 5 * time.Minute} {
		if got := failureBackoff(attempts); got != want {
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

// The run registry's steps, one decision each: a clone waits, runs,
// fails once (its error reported once), waits out its backoff, is tried
// again, completes; a volume made again from another source gets a new
// run and the old one is cancelled.
func TestACloneRunSteps(t *testing.T) {
	log := logrus.NewEntry(logrus.New())
	now := time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "copy"}, Spec: longhorn.VolumeSpec{DataSource: "vol://src"}}
	ds := lhtypes.DataSource{Volume: "src", Snapshot: "clone-x"}
	var cl clones
	expect := func(what string, want runStep, wantErr bool) *cloneRun {
		t.Helper()
		r, step, err := cl.step(v, ds, now, log)
		if step != want || (err != nil) != wantErr {
			t.Fatalf("%s: step %d, %v; want %d, error %v", what, step, err, want, wantErr)
		}
		return r
	}
	r := expect("a new clone waits for its source", stepStart, false)
	if again := expect("still waiting", stepStart, false); again != r {
		t.Fatal("a waiting clone got a new run")
	}
	if !cl.start("copy", r, func() {}) {
		t.Fatal("the run could not start")
	}
	expect("its copy runs", stepRunning, false)
	r.err = errors.New("read failed")
	close(r.done)
	expect("it failed: the error, once", stepFailed, true)
	expect("its retry is not due", stepRetryLater, false)
	now = now.Add(failureRetry)
	r2 := expect("its retry is due: a new run", stepStart, false)
	if r2 == r || r2.attempts != 1 {
		t.Fatalf("the retry's run: %+v", r2)
	}
	cl.start("copy", r2, func() {})
	close(r2.done)
	expect("it completed", stepCompleted, false)
	expect("still completed until the status says so", stepCompleted, false)

	cancelled := false
	cl.runs["copy"].cancel = func() { cancelled = true }
	v.Spec.DataSource = "snap://other/s"
	if r3 := expect("made again from another source", stepStart, false); r3.dataSource != "snap://other/s" || !cancelled {
		t.Fatalf("the new source's run: %+v, old cancelled %v", r3, cancelled)
	}
	if cl.start("copy", r, func() {}) {
		t.Fatal("a run no longer the volume's started")
	}
}
