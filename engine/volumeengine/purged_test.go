package volumeengine

import (
	"fmt"
	"testing"
	"time"
)

func waitPurge(t *testing.T, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.PurgeStatus().IsPurging && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := e.PurgeStatus(); st.State != "complete" {
		t.Fatalf("purge status %+v", st)
	}
}

func TestAPurgedSnapshotIsToldApartFromOneThatVanished(t *testing.T) {
	e, _ := newEngine(t, 2)
	// "purged" is merged into its child "kept"; "kept" stays.
	for _, n := range []string{"purged", "kept"} {
		if _, err := e.CreateSnapshot(n, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteSnapshot("purged"); err != nil {
		t.Fatal(err)
	}
	if e.WasPurged("purged") {
		t.Fatal("a snapshot only marked removed counts as purged")
	}
	e.StartPurge()
	waitPurge(t, e)
	if !e.WasPurged("purged") || e.WasPurged("kept") || e.WasPurged("never") {
		t.Fatalf("purged %v, kept %v, never %v", e.WasPurged("purged"), e.WasPurged("kept"), e.WasPurged("never"))
	}
	// A new snapshot of the name is not the purged one.
	if _, err := e.CreateSnapshot("purged", nil); err != nil {
		t.Fatal(err)
	}
	if e.WasPurged("purged") {
		t.Fatal("a snapshot taken again under a purged name still counts as purged")
	}
}

func TestThePurgedRecordIsBounded(t *testing.T) {
	var p purgedNames
	for i := 0; i < purgedLimit+10; i++ {
		p.add([]string{fmt.Sprint(i)})
	}
	if len(p.order) != purgedLimit || len(p.set) != purgedLimit {
		t.Fatalf("%d names in order, %d in the set", len(p.order), len(p.set))
	}
	if p.has("0") || p.has("9") || !p.has("10") || !p.has(fmt.Sprint(purgedLimit+9)) {
		t.Fatal("the oldest names were not the ones dropped")
	}
}
