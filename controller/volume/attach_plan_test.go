package volume

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestDecideAttach is syncAttachment's decision table: whether the engine
// runs on this node (node-1) or stops, what the Attach condition becomes
// before a start, and a detached volume's robustness, for each state of
// the volume, its replicas, its engine, its restore and its clone.
func TestDecideAttach(t *testing.T) {
	volume := func(mutate ...func(*longhorn.Volume)) *longhorn.Volume {
		v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"}, Spec: longhorn.VolumeSpec{NumberOfReplicas: 2}}
		for _, m := range mutate {
			m(v)
		}
		return v
	}
	here := func(v *longhorn.Volume) { v.Spec.NodeID = "node-1" }
	elsewhere := func(v *longhorn.Volume) { v.Spec.NodeID = "node-2" }
	noFrontend := func(v *longhorn.Volume) { v.Spec.DisableFrontend = true }
	onNode2 := errors.New("volume vol cannot be attached to node \"node-1\": replica vol-r-0 is on node node-2")
	diskGone := &diskNotHereError{"replica vol-r-0 is on disk disk-uuid-1 at /gone, which is not a disk of node \"node-1\""}
	failedReplicas := []*longhorn.Replica{
		{ObjectMeta: metav1.ObjectMeta{Name: "vol-r-0"}, Spec: longhorn.ReplicaSpec{FailedAt: "2026-11-26T10:00:00Z"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "vol-r-1"}, Spec: longhorn.ReplicaSpec{FailedAt: "2026-11-26T10:05:00Z"}},
	}
	const unknown, faulted = longhorn.VolumeRobustnessUnknown, longhorn.VolumeRobustnessFaulted

	for _, tc := range []struct {
		name string
		view attachView
		want attachPlan // its message is checked by says
		says string     // in the plan's message
	}{
		// The Attach condition.
		{"detached: no Attach condition, the engine stops",
			attachView{volume: volume(), replicas: 2, ready: true},
			attachPlan{attach: removeCondition, stop: true, robustness: unknown}, ""},
		{"attached here, a replica on another node: Attach False ReplicasOnOtherNode, no engine",
			attachView{volume: volume(here), notLocal: onNode2, replicas: 2, ready: true},
			attachPlan{attach: setConditionFalse, reason: ReasonReplicasOnOtherNode, stop: true, robustness: unknown}, "is on node node-2"},
		{"attached here, a replica on a disk this node does not have: Attach False ReplicaDiskMissing, no engine",
			attachView{volume: volume(here), notLocal: diskGone, replicas: 2, ready: true},
			attachPlan{attach: setConditionFalse, reason: ReasonReplicaDiskMissing, stop: true, robustness: unknown}, "not a disk of node"},
		{"attached here, every replica failed, no engine: Attach False AllReplicasFailed naming them and the salvage, faulted",
			attachView{volume: volume(here), replicas: 2, failed: failedReplicas, allFailed: true, ready: true},
			attachPlan{attach: setConditionFalse, reason: ReasonAllReplicasFailed, stop: true, robustness: faulted}, "replica vol-r-1 failed at 2026-11-26T10:05:00Z"},
		{"attached here, every replica failed, the engine runs: it keeps running, the condition as it was",
			attachView{volume: volume(here), replicas: 2, failed: failedReplicas, allFailed: true, running: true, ready: true},
			attachPlan{attach: keepCondition, run: true, frontend: true}, ""},
		{"attached to another node: the condition as it was (that node's), no engine here",
			attachView{volume: volume(elsewhere), replicas: 2, ready: true},
			attachPlan{attach: keepCondition, stop: true, robustness: unknown}, ""},
		{"attached to another node, every replica failed: no engine here, faulted",
			attachView{volume: volume(elsewhere), replicas: 2, failed: failedReplicas, allFailed: true, ready: true},
			attachPlan{attach: keepCondition, stop: true, robustness: faulted}, ""},
		{"detached, every replica failed: no Attach condition, robustness unknown",
			attachView{volume: volume(), replicas: 2, failed: failedReplicas, allFailed: true, ready: true},
			attachPlan{attach: removeCondition, stop: true, robustness: unknown}, ""},

		// The engine starts, or runs on.
		{"attached here, replicas here and ready: the engine runs with its frontend",
			attachView{volume: volume(here), replicas: 2, ready: true},
			attachPlan{run: true, frontend: true}, ""},
		{"attached here, already running: it runs on",
			attachView{volume: volume(here), replicas: 2, running: true, ready: true},
			attachPlan{run: true, frontend: true}, ""},
		{"attached here, frontend disabled: the engine runs without one",
			attachView{volume: volume(here, noFrontend), replicas: 2, ready: true},
			attachPlan{run: true}, ""},
		{"attached here, one replica failed: the engine runs on the other",
			attachView{volume: volume(here), replicas: 2, failed: failedReplicas[:1], ready: true},
			attachPlan{run: true, frontend: true}, ""},
		{"detached, a clone reads it: the engine runs without a frontend, no Attach condition",
			attachView{volume: volume(), forClone: true, replicas: 2, ready: true},
			attachPlan{attach: removeCondition, run: true}, ""},

		// The engine does not start, or stops.
		{"detached, a clone reads it, its replicas on another node: no engine",
			attachView{volume: volume(), forClone: true, notLocal: onNode2, replicas: 2, ready: true},
			attachPlan{attach: removeCondition, stop: true, robustness: unknown}, ""},
		{"attached here, no replica yet: no engine",
			attachView{volume: volume(here), ready: true},
			attachPlan{stop: true, robustness: unknown}, ""},
		{"attached here, a backing image's file not ready: no engine yet",
			attachView{volume: volume(here), replicas: 2},
			attachPlan{stop: true, robustness: unknown}, ""},
		{"attached here, restoring its backup: no frontend engine, the restore's engine runs on",
			attachView{volume: volume(here), replicas: 2, ready: true, restoreRequired: true, restoring: true},
			attachPlan{robustness: unknown}, ""},
		{"detached, restoring its backup: the restore's engine runs on",
			attachView{volume: volume(), replicas: 2, ready: true, restoreRequired: true, restoring: true},
			attachPlan{attach: removeCondition, robustness: unknown}, ""},
		{"attached here, its restore not begun (replicas still made): no engine",
			attachView{volume: volume(here), replicas: 1, ready: true, restoreRequired: true},
			attachPlan{stop: true, robustness: unknown}, ""},
		{"attached here, cloning: no frontend engine, the clone's engine runs on",
			attachView{volume: volume(here), replicas: 2, ready: true, cloneRequired: true, cloning: true},
			attachPlan{robustness: unknown}, ""},
		{"attached here, its clone waiting (a retry's backoff): no engine",
			attachView{volume: volume(here), replicas: 2, ready: true, cloneRequired: true},
			attachPlan{stop: true, robustness: unknown}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.view.nodeID = "node-1"
			got := decideAttach(tc.view)
			message := got.message
			got.message = ""
			if got != tc.want || !strings.Contains(message, tc.says) || (got.attach == setConditionFalse) != (message != "") {
				t.Errorf("decideAttach = %+v %q, want %+v saying %q", got, message, tc.want, tc.says)
			}
		})
	}
}

func TestDecideAttachAllFailedSaysHowToSalvage(t *testing.T) {
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"}, Spec: longhorn.VolumeSpec{NodeID: "node-1", NumberOfReplicas: 1}}
	failed := []*longhorn.Replica{{ObjectMeta: metav1.ObjectMeta{Name: "vol-r-0"}, Spec: longhorn.ReplicaSpec{FailedAt: "2026-11-26T10:00:00Z"},
		Status: longhorn.ReplicaStatus{Conditions: []longhorn.Condition{{Type: longhorn.ReplicaConditionTypeFailed, Message: "input/output error"}}}}}
	p := decideAttach(attachView{volume: v, nodeID: "node-1", replicas: 1, failed: failed, allFailed: true, ready: true})
	if want := allFailedMessage(v, failed, nil); p.message != want || !strings.Contains(p.message, "input/output error") || !strings.Contains(p.message, "clear spec.failedAt") {
		t.Errorf("message %q, want %q", p.message, want)
	}
}
