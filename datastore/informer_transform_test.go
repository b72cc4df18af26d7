package datastore

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The informers cache objects without their managedFields; anything that
// is not an object (a tombstone) passes as it is.
func TestInformersDropManagedFields(t *testing.T) {
	s := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"k": "v"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "longhorn-manager", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	out, err := stripManagedFields(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*longhorn.Snapshot); got.ManagedFields != nil || got.Labels["k"] != "v" {
		t.Fatalf("got %+v, want the object without managedFields", got.ObjectMeta)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/s", Obj: s}
	if out, err := stripManagedFields(tomb); err != nil || out != tomb {
		t.Fatalf("a tombstone became %v (%v)", out, err)
	}
}
