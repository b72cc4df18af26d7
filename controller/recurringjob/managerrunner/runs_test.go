package managerrunner

import (
	"testing"
	"time"
)

func TestRunTableRunsATickOnce(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tbl := newRunTable()
	k := runKey{job: "j", tick: now.Unix()}
	if !tbl.claim(k, now) || tbl.claim(k, now) {
		t.Fatal("a running tick was claimed twice")
	}
	if !tbl.activeFor("j") || tbl.activeFor("other") {
		t.Fatal("activeFor is wrong")
	}
	// Interrupted: forgotten, so a later term may resume it.
	tbl.release(k, false, now)
	if tbl.activeFor("j") || !tbl.claim(k, now) {
		t.Fatal("an interrupted tick cannot be resumed")
	}
	// Finished: a stale cache that still lists it active cannot restart it.
	tbl.release(k, true, now)
	if tbl.claim(k, now.Add(finishedRunMemory-time.Second)) {
		t.Fatal("a finished tick was started again")
	}
	if !tbl.claim(runKey{job: "j", tick: now.Add(time.Minute).Unix()}, now) {
		t.Fatal("the next tick cannot start")
	}
	// The memory is bounded in time.
	if !tbl.claim(k, now.Add(finishedRunMemory+time.Second)) {
		t.Fatal("finished runs are remembered forever")
	}
}
