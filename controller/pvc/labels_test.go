package pvc

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClaimJobLabels(t *testing.T) {
	const (
		source  = "recurring-job.longhorn.io/source"
		daily   = "recurring-job.longhorn.io/daily"
		weekly  = "recurring-job.longhorn.io/weekly"
		gold    = "recurring-job-group.longhorn.io/gold"
		deflt   = "recurring-job-group.longhorn.io/default"
		enabled = "enabled"
	)
	claim := func(labels map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	for _, tc := range []struct {
		name          string
		volume, claim map[string]string
		want          map[string]string
	}{
		{"the claim's job and group are added, the default group goes",
			map[string]string{deflt: enabled, "app": "db"},
			map[string]string{source: enabled, daily: enabled, gold: enabled, "tier": "x"},
			map[string]string{daily: enabled, gold: enabled, "app": "db"}},
		{"a job the claim no longer has is removed",
			map[string]string{daily: enabled, weekly: enabled},
			map[string]string{source: enabled, weekly: enabled},
			map[string]string{weekly: enabled}},
		{"a claim that selects nothing puts the volume in the default group",
			map[string]string{daily: enabled},
			map[string]string{source: enabled},
			map[string]string{deflt: enabled}},
		{"the source label itself is not copied", nil,
			map[string]string{source: enabled, gold: enabled},
			map[string]string{gold: enabled}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.volume)
			got := claimJobLabels(tc.volume, claim(tc.claim))
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.volume, before) {
				t.Errorf("the volume's labels were changed in place: %v", tc.volume)
			}
			if !jobLabelsEqual(got, tc.want) {
				t.Errorf("jobLabelsEqual(%v, %v) is false", got, tc.want)
			}
		})
	}
	if isSource(claim(map[string]string{source: "disabled"})) || isSource(nil) || !isSource(claim(map[string]string{source: enabled})) {
		t.Error("isSource: only recurring-job.longhorn.io/source: enabled makes a claim the source")
	}
}
