package kit

import (
	"testing"

	"k8s.io/client-go/tools/reference"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The recorder's scheme must name Longhorn objects, or their events are
// dropped with "no kind is registered".
func TestEventSchemeKnowsLonghornTypes(t *testing.T) {
	ref, err := reference.GetReference(eventScheme, &longhorn.RecurringJob{})
	if err != nil {
		t.Fatalf("reference to a RecurringJob: %v", err)
	}
	if ref.Kind != "RecurringJob" || ref.APIVersion != "longhorn.io/v1beta2" {
		t.Fatalf("reference = %s %s, want longhorn.io/v1beta2 RecurringJob", ref.APIVersion, ref.Kind)
	}
}
