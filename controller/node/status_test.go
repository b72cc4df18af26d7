package node

import (
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/internal/diskconfig"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func lease(renewedAgo time.Duration, seconds int32) *coordinationv1.Lease {
	renew := metav1.NewMicroTime(testNow.Add(-renewedAgo))
	return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &renew, LeaseDurationSeconds: &seconds}}
}

func TestNodeReadyCondition(t *testing.T) {
	cases := []struct {
		name       string
		lease      *coordinationv1.Lease
		wantStatus longhorn.ConditionStatus
		wantReason string
	}{
		{"a fresh heartbeat makes the node Ready", lease(5*time.Second, 40), longhorn.ConditionStatusTrue, longhorn.NodeConditionReasonManagerRunning},
		{"a heartbeat older than its duration makes it not Ready", lease(41*time.Second, 40), longhorn.ConditionStatusFalse, longhorn.NodeConditionReasonManagerStale},
		{"no heartbeat at all makes it not Ready", nil, longhorn.ConditionStatusFalse, longhorn.NodeConditionReasonManagerPodMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := kit.GetCondition(nodeReadyCondition(nil, c.lease, testNow), longhorn.ConditionTypeReady)
			if got.Status != c.wantStatus || got.Reason != c.wantReason {
				t.Fatalf("got %s/%s, want %s/%s", got.Status, got.Reason, c.wantStatus, c.wantReason)
			}
		})
	}
}

func TestSetConditionKeepsTransitionTimeWhileStatusHolds(t *testing.T) {
	first := kit.SetCondition(nil, "Ready", longhorn.ConditionStatusTrue, "A", "", testNow)
	later := kit.SetCondition(first, "Ready", longhorn.ConditionStatusTrue, "A", "", testNow.Add(time.Hour))
	if later[0].LastTransitionTime != first[0].LastTransitionTime {
		t.Fatalf("transition time moved without a transition: %s -> %s", first[0].LastTransitionTime, later[0].LastTransitionTime)
	}
	flipped := kit.SetCondition(later, "Ready", longhorn.ConditionStatusFalse, "B", "", testNow.Add(time.Hour))
	if flipped[0].LastTransitionTime == first[0].LastTransitionTime || len(flipped) != 1 {
		t.Fatalf("a transition must move the time and keep one condition: %+v", flipped)
	}
}

func TestDiskStatus(t *testing.T) {
	info := &diskInfo{Config: diskconfig.Config{DiskUUID: "uuid-1"}, StorageMaximum: 1000, StorageAvail: 600}
	cases := []struct {
		name            string
		spec            longhorn.DiskSpec
		old             *longhorn.DiskStatus
		probe           diskProbe
		wantReady       longhorn.ConditionStatus
		wantReadyReason string
		wantSchedulable longhorn.ConditionStatus
		wantUUID        string
	}{
		{"a new disk takes the UUID it was probed with", longhorn.DiskSpec{Path: "/d", AllowScheduling: true}, nil, diskProbe{info: info},
			longhorn.ConditionStatusTrue, longhorn.DiskConditionReasonDiskReady, longhorn.ConditionStatusTrue, "uuid-1"},
		{"a disk whose path fails is not ready", longhorn.DiskSpec{Path: "/d", AllowScheduling: true}, nil, diskProbe{err: errors.New("no such folder")},
			longhorn.ConditionStatusFalse, longhorn.DiskConditionReasonDiskFilesystem, longhorn.ConditionStatusFalse, ""},
		{"another disk mounted at the path is refused", longhorn.DiskSpec{Path: "/d", AllowScheduling: true}, &longhorn.DiskStatus{DiskUUID: "uuid-0"}, diskProbe{info: info},
			longhorn.ConditionStatusFalse, longhorn.DiskConditionReasonDiskUUIDMismatch, longhorn.ConditionStatusFalse, "uuid-0"},
		{"scheduling disabled leaves the disk ready but unschedulable", longhorn.DiskSpec{Path: "/d"}, nil, diskProbe{info: info},
			longhorn.ConditionStatusTrue, longhorn.DiskConditionReasonDiskReady, longhorn.ConditionStatusFalse, "uuid-1"},
		{"a disk with no space beyond its reserve is unschedulable", longhorn.DiskSpec{Path: "/d", AllowScheduling: true, StorageReserved: 600}, nil, diskProbe{info: info},
			longhorn.ConditionStatusTrue, longhorn.DiskConditionReasonDiskReady, longhorn.ConditionStatusFalse, "uuid-1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := diskStatus(c.spec, c.old, c.probe, testNow)
			ready := kit.GetCondition(st.Conditions, longhorn.ConditionTypeReady)
			if ready.Status != c.wantReady || ready.Reason != c.wantReadyReason {
				t.Errorf("Ready %s/%s, want %s/%s", ready.Status, ready.Reason, c.wantReady, c.wantReadyReason)
			}
			if s := kit.GetCondition(st.Conditions, longhorn.ConditionTypeSchedulable).Status; s != c.wantSchedulable {
				t.Errorf("Schedulable %s, want %s", s, c.wantSchedulable)
			}
			if st.DiskUUID != c.wantUUID {
				t.Errorf("UUID %q, want %q", st.DiskUUID, c.wantUUID)
			}
		})
	}
}

func TestEnsureDiskConfigKeepsTheUUID(t *testing.T) {
	dir := t.TempDir()
	first, err := diskconfig.Ensure(dir, "disk-a")
	if err != nil {
		t.Fatal(err)
	}
	again, err := diskconfig.Ensure(dir, "other-name")
	if err != nil {
		t.Fatal(err)
	}
	if *again != *first {
		t.Fatalf("disk identity changed: %+v -> %+v", first, again)
	}
	info, err := probeDisk(dir, "disk-a")
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.DiskUUID != first.DiskUUID || info.StorageMaximum <= 0 {
		t.Fatalf("probe: %+v", info)
	}
}

func TestSetScheduled(t *testing.T) {
	disks := map[string]*longhorn.DiskStatus{
		"holds two replicas": {DiskUUID: "uuid-1", StorageScheduled: 5},
		"holds none":         {DiskUUID: "uuid-2", StorageScheduled: 7},
		"never probed":       {},
		"gone":               nil,
	}
	// Replicas whose disk is not known yet have no disk UUID: they are
	// counted against no disk, not against one never probed.
	setScheduled(disks, map[string]int64{"uuid-1": 300, "": 50, "uuid-9": 1})
	for name, want := range map[string]int64{"holds two replicas": 300, "holds none": 0, "never probed": 0} {
		if got := disks[name].StorageScheduled; got != want {
			t.Errorf("%s: storageScheduled %d, want %d", name, got, want)
		}
	}
	if disks["gone"] != nil {
		t.Errorf("a nil status was filled in: %+v", disks["gone"])
	}
}
