package volumeengine

import (
	"reflect"
	"testing"
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
