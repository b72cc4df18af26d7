package instancemanager

import (
	"context"
	"errors"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
)

func names(list []instance.ServedReplica) []string {
	var out []string
	for _, sr := range list {
		out = append(out, sr.Name)
	}
	sort.Strings(out)
	return out
}

// A new replica is served in the manager's image's instance manager (the
// newest after an upgrade); one an older instance manager serves stays
// there, as it holds the replica's folder; a stop reaches both; the list
// is both's.
func TestSetServesEachReplicaInTheNewestUnlessAnOlderOneServesIt(t *testing.T) {
	s, cur, v1, _, _ := newTestSet(t)
	v1.served["r-old"] = instance.ServedReplica{Name: "r-old", Address: v1.address}

	sr, err := s.ServeReplica("vol", "uid", instance.ReplicaDir{Name: "r-new", Dir: "/d/r-new"}, 1<<20)
	if err != nil || sr.Address != cur.address {
		t.Fatalf("serve of a new replica: %+v %v, want it in v2 at %s", sr, err, cur.address)
	}
	if _, ok := v1.served["r-new"]; ok {
		t.Fatal("v1 was asked to serve the new replica")
	}
	// Served again (the manager started again): where it is.
	sr, err = s.ServeReplica("vol2", "uid2", instance.ReplicaDir{Name: "r-old", Dir: "/d/r-old"}, 1<<20)
	if err != nil || sr.Address != v1.address {
		t.Fatalf("serve of a replica v1 serves: %+v %v, want it in v1 at %s", sr, err, v1.address)
	}
	if _, ok := cur.served["r-old"]; ok {
		t.Fatal("v2 was asked to serve the replica v1 holds: the folder's lock would refuse it")
	}

	list, address, err := s.ListReplicas()
	if got := names(list); err != nil || address != cur.address || len(got) != 2 || got[0] != "r-new" || got[1] != "r-old" {
		t.Fatalf("ListReplicas = %v %q %v, want both at v2's address", got, address, err)
	}

	if err := s.StopReplica("r-old"); err != nil {
		t.Fatal(err)
	}
	if len(v1.served) != 0 || len(cur.replicaStop) != 1 {
		t.Fatalf("stop: v1 serves %v, v2 was asked %v", v1.served, cur.replicaStop)
	}
	// Stopped, it is opened in v2 at its next serve.
	if sr, err := s.ServeReplica("vol2", "uid2", instance.ReplicaDir{Name: "r-old", Dir: "/d/r-old"}, 1<<20); err != nil || sr.Address != cur.address {
		t.Fatalf("serve after the stop: %+v %v, want v2", sr, err)
	}
}

// An older instance manager without the replica calls serves nothing: it
// is passed over, not an error. One that cannot say what it serves makes
// the list fail (the caller then trusts no partial one) and a stop fail,
// but a serve goes to the newest (the folder's lock guards the replica).
func TestSetReplicasWithOlderOrSilentInstanceManagers(t *testing.T) {
	s, cur, v1, _, _ := newTestSet(t)
	v1.old = true
	if _, err := s.ServeReplica("vol", "uid", instance.ReplicaDir{Name: "r"}, 1); err != nil {
		t.Fatal(err)
	}
	if list, _, err := s.ListReplicas(); err != nil || len(list) != 1 {
		t.Fatalf("ListReplicas beside an old v1: %v %v", list, err)
	}
	if err := s.StopReplica("r"); err != nil || len(cur.served) != 0 {
		t.Fatalf("StopReplica beside an old v1: %v, v2 serves %v", err, cur.served)
	}

	v1.old, v1.listErr = false, instance.ErrUnreachable
	if sr, err := s.ServeReplica("vol", "uid", instance.ReplicaDir{Name: "r"}, 1); err != nil || sr.Address != cur.address {
		t.Fatalf("serve while v1 does not answer: %+v %v", sr, err)
	}
	if _, _, err := s.ListReplicas(); !errors.Is(err, instance.ErrUnreachable) {
		t.Fatalf("ListReplicas while v1 does not answer: want ErrUnreachable, got %v", err)
	}
	if err := s.StopReplica("r"); !errors.Is(err, instance.ErrUnreachable) || len(cur.served) != 0 {
		t.Fatalf("StopReplica while v1 does not answer: %v (v2 serves %v)", err, cur.served)
	}

	// The current one from before the replica calls: its error is the
	// list's.
	v1.listErr, cur.old = nil, true
	if _, _, err := s.ListReplicas(); !errors.Is(err, instancemanager.ErrUnimplemented) {
		t.Fatalf("ListReplicas of an old current one: %v", err)
	}
}

// An older instance manager that serves a replica to another node's
// engine is not deleted, though it hosts no engine and keeps no device;
// nor while it cannot say.
func TestSetKeepsAnOlderInstanceManagerThatServesAReplica(t *testing.T) {
	s, _, v1, devices, old := newTestSet(t)
	ctx := context.Background()
	pod, err := s.keeper.kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Stop("attached-before")
	delete(devices.volumes, "attached-before")
	v1.served["r"] = instance.ServedReplica{Name: "r"}
	if retired, err := s.Retire(ctx, old, pod); retired || err != nil {
		t.Fatalf("Retire of v1 while it serves a replica: %v %v", retired, err)
	}
	delete(v1.served, "r")
	v1.listErr = instance.ErrUnreachable
	if retired, _ := s.Retire(ctx, old, pod); retired {
		t.Fatal("Retire of v1 while it cannot say what it serves")
	}
	v1.listErr, v1.old = nil, true
	if retired, err := s.Retire(ctx, old, pod); !retired || err != nil {
		t.Fatalf("Retire of an idle v1 from before the replica calls: %v %v", retired, err)
	}
}
