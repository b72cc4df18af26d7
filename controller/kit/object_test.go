package kit

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func TestFinalizerHelpersChangeOnlyWhatIsMissingOrThere(t *testing.T) {
	shared := []string{"other", types.LonghornFinalizer}
	obj := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Finalizers: shared}}
	if AddFinalizer(obj) {
		t.Error("AddFinalizer reported a change on an object that has the finalizer")
	}
	if !RemoveFinalizer(obj) || HasFinalizer(obj) || !slices.Equal(obj.Finalizers, []string{"other"}) {
		t.Errorf("after RemoveFinalizer: %v", obj.Finalizers)
	}
	if !slices.Equal(shared, []string{"other", types.LonghornFinalizer}) {
		t.Errorf("RemoveFinalizer wrote through to the cache's slice: %v", shared)
	}
	if RemoveFinalizer(obj) {
		t.Error("RemoveFinalizer reported a change on an object without the finalizer")
	}
	if !AddFinalizer(obj) || !HasFinalizer(obj) {
		t.Errorf("after AddFinalizer: %v", obj.Finalizers)
	}
}

func TestSoonestPicksTheFirstLookAgain(t *testing.T) {
	for _, c := range []struct {
		in   []Result
		want Result
	}{
		{nil, Result{}},
		{[]Result{{}, {}}, Result{}},
		{[]Result{{}, {RequeueAfter: 5}}, Result{RequeueAfter: 5}},
		{[]Result{{RequeueAfter: 7}, {}, {RequeueAfter: 3}}, Result{RequeueAfter: 3}},
	} {
		if got := Soonest(c.in...); got != c.want {
			t.Errorf("Soonest(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
