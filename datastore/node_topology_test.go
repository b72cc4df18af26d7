package datastore

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

func TestKubeNodeTopologyReadsTheWellKnownLabels(t *testing.T) {
	kube := kubefake.NewSimpleClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{corev1.LabelTopologyZone: "z1", corev1.LabelTopologyRegion: "r1"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{corev1.LabelTopologyZone: "z2"}}},
	)
	lh := lhfake.NewSimpleClientset()
	ds := New("ns", lh, kube, NewInformers(lh, kube, "ns", 0))
	ctx := context.Background()
	if got, err := ds.KubeNodeTopology(ctx, "a"); err != nil || got != (NodeTopology{Region: "r1", Zone: "z1", Found: true}) {
		t.Errorf("node a: %+v, %v", got, err)
	}
	if got, err := ds.KubeNodeTopology(ctx, "b"); err != nil || got != (NodeTopology{Zone: "z2", Found: true}) {
		t.Errorf("node b: %+v, %v", got, err)
	}
	if got, err := ds.KubeNodeTopology(ctx, "c"); err != nil || got.Found {
		t.Errorf("node c, which Kubernetes does not have: %+v, %v", got, err)
	}
}
