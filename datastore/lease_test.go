package datastore

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

func leaseStore(kube *fake.Clientset) *DataStore {
	lh := lhfake.NewSimpleClientset()
	return New("ns", lh, kube, NewInformers(lh, kube, "ns", 0))
}

func TestReleaseLeaseOnlyWhenStillHeld(t *testing.T) {
	now := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	lease := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "runner"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), LeaseTransitions: ptr.To[int32](3)}}
	}
	get := func(kube *fake.Clientset) *coordinationv1.Lease {
		l, err := kube.CoordinationV1().Leases("ns").Get(context.Background(), "runner", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	kube := fake.NewSimpleClientset(lease("node-1-abcde"))
	if err := leaseStore(kube).ReleaseLease("runner", "node-1-abcde", now); err != nil {
		t.Fatal(err)
	}
	if l := get(kube); *l.Spec.HolderIdentity != "" || *l.Spec.LeaseDurationSeconds != 1 || *l.Spec.LeaseTransitions != 3 {
		t.Fatalf("held Lease after release: %+v", l.Spec)
	}

	kube = fake.NewSimpleClientset(lease("node-2-fghij"))
	if err := leaseStore(kube).ReleaseLease("runner", "node-1-abcde", now); err != nil {
		t.Fatal(err)
	}
	if l := get(kube); *l.Spec.HolderIdentity != "node-2-fghij" || *l.Spec.LeaseDurationSeconds != 15 {
		t.Fatalf("another manager's Lease was changed: %+v", l.Spec)
	}

	if err := leaseStore(fake.NewSimpleClientset()).ReleaseLease("runner", "node-1-abcde", now); err != nil {
		t.Fatalf("no Lease: %v", err)
	}
}
