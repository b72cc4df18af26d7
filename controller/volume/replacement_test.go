package volume

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A replica made in place of a lost one is never opened by an engine
// start before its rebuild; every other replica is, a failed one too (the
// start compares the others with it). Failed replicas are not counted
// among those numberOfReplicas asks for, and one that failed means the
// volume held data.
func TestReplicasAStartOpensAndThoseCounted(t *testing.T) {
	rep := func(name string, healthy, failed, target bool) *longhorn.Replica {
		r := &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if healthy {
			r.Spec.HealthyAt = "2026-12-01T00:00:00Z"
		}
		if failed {
			r.Spec.FailedAt = "2026-12-02T00:00:00Z"
		}
		if target {
			r.Annotations = map[string]string{types.AnnotationRebuildTarget: "true"}
		}
		return r
	}
	fresh := []*longhorn.Replica{rep("r-0", false, false, false), rep("r-1", false, false, false)}
	if holdsData(fresh) || len(openable(fresh)) != 2 || countActive(fresh) != 2 {
		t.Errorf("a new volume's replicas: holdsData %v, openable %d, active %d", holdsData(fresh), len(openable(fresh)), countActive(fresh))
	}
	lost := []*longhorn.Replica{rep("r-0", true, false, false), rep("r-1", true, true, false), rep("r-2", false, false, true)}
	opened := openable(lost)
	if !holdsData(lost) || len(opened) != 2 || opened[0].Name != "r-0" || opened[1].Name != "r-1" || countActive(lost) != 2 {
		t.Errorf("a volume with a failed replica and its replacement: openable %v, active %d", opened, countActive(lost))
	}
	if !awaitingRebuild(lost[2]) || awaitingRebuild(lost[0]) {
		t.Error("awaitingRebuild")
	}
	joined := rep("r-2", true, false, true)
	if awaitingRebuild(joined) {
		t.Error("a rebuilt replica (healthyAt set) still awaits its rebuild")
	}
	onlyFailed := []*longhorn.Replica{rep("r-0", false, true, false)}
	if !holdsData(onlyFailed) {
		t.Error("a volume whose only replica failed holds no data, so it would get an empty one")
	}
}
