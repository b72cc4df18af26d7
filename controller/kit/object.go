package kit

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// HasFinalizer tells whether the object carries the manager's finalizer.
func HasFinalizer(obj metav1.Object) bool {
	return slices.Contains(obj.GetFinalizers(), types.LonghornFinalizer)
}

// AddFinalizer adds the manager's finalizer to obj (a copy the caller
// writes) and tells whether it was missing.
func AddFinalizer(obj metav1.Object) bool {
	if HasFinalizer(obj) {
		return false
	}
	obj.SetFinalizers(append(obj.GetFinalizers(), types.LonghornFinalizer))
	return true
}

// RemoveFinalizer removes the manager's finalizer from obj (a copy the
// caller writes) and tells whether it was there.
func RemoveFinalizer(obj metav1.Object) bool {
	if !HasFinalizer(obj) {
		return false
	}
	obj.SetFinalizers(slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == types.LonghornFinalizer }))
	return true
}

// StatusChanged is the one comparison every controller makes before a
// status write: semantic equality, so a quantity or a time written in
// another form is not a change.
func StatusChanged(old, cur any) bool {
	return !equality.Semantic.DeepEqual(old, cur)
}

// OwnedBy is the owner reference that makes an object go with its volume
// (the garbage collector deletes it when the volume is deleted).
func OwnedBy(v *longhorn.Volume) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "Volume", Name: v.Name, UID: v.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
}
