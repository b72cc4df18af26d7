package pvc

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/types"
)

// isSource reports whether the claim's job and group labels are its
// volume's: it is labelled recurring-job.longhorn.io/source: enabled.
func isSource(claim *corev1.PersistentVolumeClaim) bool {
	return claim != nil && claim.Labels[types.RecurringJobSourceLabel] == types.LabelValueEnabled
}

// claimJobLabels is what a volume's labels become when its claim is the
// source of its jobs: every other label of the volume as it is, the
// claim's job and group labels in place of the volume's, and the
// default-group rule applied (a claim that selects nothing puts the
// volume in the default group; one that selects something takes it out).
// The answer is a new map; labels is not changed.
func claimJobLabels(labels map[string]string, claim *corev1.PersistentVolumeClaim) map[string]string {
	out := make(map[string]string, len(labels))
	for key, value := range labels {
		if !types.IsRecurringJobSelectionLabel(key) {
			out[key] = value
		}
	}
	for key, value := range claim.Labels {
		if types.IsRecurringJobSelectionLabel(key) {
			out[key] = value
		}
	}
	fixed, _ := datastore.FixupRecurringJobLabels(out)
	return fixed
}

// jobLabelsEqual reports whether a and b have the same job and group
// labels.
func jobLabelsEqual(a, b map[string]string) bool {
	return maps.EqualFunc(selection(a), selection(b), func(x, y string) bool { return x == y })
}

func selection(labels map[string]string) map[string]string {
	out := map[string]string{}
	for key, value := range labels {
		if types.IsRecurringJobSelectionLabel(key) {
			out[key] = value
		}
	}
	return out
}
