package volumeengine

import (
	"reflect"
	"testing"
	"time"
)

// Status answers in one call what the four status reads answer one by one
// (a status mirror reads it once per engine change).
func TestStatusIsOneCallOfTheFourReads(t *testing.T) {
	e, _ := newEngine(t, 2)
	if _, err := e.CreateSnapshot("s1", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	e.OnCall(func(call string) { calls = append(calls, call) })

	st := e.Status()
	if !reflect.DeepEqual(calls, []string{"Status"}) {
		t.Fatalf("Status made the calls %v, want one", calls)
	}
	snaps, err := e.Snapshots()
	if err != nil || st.SnapshotsError != nil {
		t.Fatal(err, st.SnapshotsError)
	}
	if !reflect.DeepEqual(st.Snapshots, snaps) {
		t.Errorf("Status snapshots %+v, Snapshots %+v", st.Snapshots, snaps)
	}
	if !reflect.DeepEqual(st.ReplicaModes, e.ReplicaModes()) {
		t.Errorf("Status replica modes %+v, ReplicaModes %+v", st.ReplicaModes, e.ReplicaModes())
	}
	if st.Purge != e.PurgeStatus() {
		t.Errorf("Status purge %+v, PurgeStatus %+v", st.Purge, e.PurgeStatus())
	}
	if !reflect.DeepEqual(st.Backups, e.BackupStatuses()) {
		t.Errorf("Status backups %+v, BackupStatuses %+v", st.Backups, e.BackupStatuses())
	}
}

// The engine is read once per change: the Engine object's mirror and the
// Snapshot objects' syncs that follow one change share that read, and
// each change (a snapshot, a purge's end) brings the next read.
func TestStatusIsReadOncePerGeneration(t *testing.T) {
	e, _ := newEngine(t, 1)
	var calls []string
	e.OnCall(func(call string) { calls = append(calls, call) })
	statusReads := func() int {
		n := 0
		for _, c := range calls {
			if c == "Status" {
				n++
			}
		}
		return n
	}
	names := func(st Status) []string {
		var out []string
		for _, s := range st.Snapshots {
			out = append(out, s.Name)
		}
		return out
	}

	first := e.Status()
	e.Status()
	if n := statusReads(); n != 1 {
		t.Fatalf("two reads with no change between them read the engine %d times, want once", n)
	}
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	after := e.Status()
	if n := statusReads(); n != 2 {
		t.Fatalf("a read after a snapshot read the engine %d times in all, want twice", n)
	}
	if len(after.Snapshots) != len(first.Snapshots)+1 {
		t.Fatalf("after the snapshot the status lists %v, before it %v", names(after), names(first))
	}
	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	e.StartPurge()
	deadline := time.Now().Add(10 * time.Second)
	for e.Status().Purge.IsPurging || e.Status().Purge.State != "complete" {
		if time.Now().After(deadline) {
			t.Fatalf("the purge did not end: %+v", e.Status().Purge)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := e.Status(); len(st.Snapshots) != len(first.Snapshots) {
		t.Fatalf("after the purge the status lists %v, want %v", names(st), names(first))
	}
}
