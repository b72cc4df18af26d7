package synctable

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

func TestWrites(t *testing.T) {
	snapshots := schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "snapshots"}
	actions := []k8stesting.Action{
		k8stesting.NewGetAction(snapshots, "ns", "s1"),
		k8stesting.NewUpdateAction(snapshots, "ns", nil),
		k8stesting.NewListAction(snapshots, schema.GroupVersionKind{}, "ns", metav1.ListOptions{}),
		k8stesting.NewUpdateSubresourceAction(snapshots, "status", "ns", nil),
		k8stesting.NewCreateAction(snapshots, "ns", nil),
		k8stesting.NewDeleteAction(snapshots, "ns", "s1"),
	}
	want := []string{"update snapshots", "update snapshots/status", "create snapshots", "delete snapshots"}
	if got := Writes(actions); !slices.Equal(got, want) {
		t.Fatalf("Writes %v, want %v", got, want)
	}
}
