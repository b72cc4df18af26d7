package recurringjob

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestLeaderTermIsWaitedFor: the runner does not compete for the Lease
// again until the last term's work has stopped, and a term whose leader
// context ended before it began never begins.
func TestLeaderTermIsWaitedFor(t *testing.T) {
	var terms leaderTerms
	ctx, cancel := context.WithCancel(context.Background())
	ok, end := terms.begin(ctx)
	if !ok {
		t.Fatal("a term with a live context did not begin")
	}
	cancel()
	waited := make(chan struct{})
	go func() { terms.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while the term's work was still stopping")
	case <-time.After(50 * time.Millisecond):
	}
	end()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return once the term ended")
	}

	// The elector returned before its callback ran: wait does not block,
	// and the late callback finds its context ended and does nothing.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	terms.wait()
	if ok, _ := terms.begin(ctx2); ok {
		t.Fatal("a term began with an ended leader context")
	}
	terms.wait()
}

func TestReleaseLeaseOnlyWhenStillHeld(t *testing.T) {
	now := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	lease := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: RunnerLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), LeaseTransitions: ptr.To[int32](3)}}
	}
	get := func(kube *fake.Clientset) *coordinationv1.Lease {
		l, err := kube.CoordinationV1().Leases("ns").Get(context.Background(), RunnerLease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	kube := fake.NewSimpleClientset(lease("node-1-abcde"))
	if err := releaseLease(kube, "ns", RunnerLease, "node-1-abcde", now); err != nil {
		t.Fatal(err)
	}
	if l := get(kube); *l.Spec.HolderIdentity != "" || *l.Spec.LeaseDurationSeconds != 1 || *l.Spec.LeaseTransitions != 3 {
		t.Fatalf("held Lease after release: %+v", l.Spec)
	}

	kube = fake.NewSimpleClientset(lease("node-2-fghij"))
	if err := releaseLease(kube, "ns", RunnerLease, "node-1-abcde", now); err != nil {
		t.Fatal(err)
	}
	if l := get(kube); *l.Spec.HolderIdentity != "node-2-fghij" || *l.Spec.LeaseDurationSeconds != 15 {
		t.Fatalf("another manager's Lease was changed: %+v", l.Spec)
	}

	if err := releaseLease(fake.NewSimpleClientset(), "ns", RunnerLease, "node-1-abcde", now); err != nil {
		t.Fatalf("no Lease: %v", err)
	}
}
