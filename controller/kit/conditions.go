package kit

import (
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// SetCondition returns conds with the condition of condType set. The
// transition time changes only when the status does, so a condition that
// keeps its status causes no write.
func SetCondition(conds []longhorn.Condition, condType string, status longhorn.ConditionStatus, reason, message string, now time.Time) []longhorn.Condition {
	out := make([]longhorn.Condition, 0, len(conds)+1)
	found := false
	for _, c := range conds {
		if c.Type != condType {
			out = append(out, c)
			continue
		}
		found = true
		if c.Status != status {
			c.LastTransitionTime = now.UTC().Format(time.RFC3339)
		}
		c.Status, c.Reason, c.Message = status, reason, message
		out = append(out, c)
	}
	if !found {
		out = append(out, longhorn.Condition{
			Type:               condType,
			Status:             status,
			Reason:             reason,
			Message:            message,
			LastTransitionTime: now.UTC().Format(time.RFC3339),
		})
	}
	return out
}

// GetCondition returns the condition of condType, or an Unknown one.
func GetCondition(conds []longhorn.Condition, condType string) longhorn.Condition {
	for _, c := range conds {
		if c.Type == condType {
			return c
		}
	}
	return longhorn.Condition{Type: condType, Status: longhorn.ConditionStatusUnknown}
}

// BoolStatus is True or False.
func BoolStatus(b bool) longhorn.ConditionStatus {
	if b {
		return longhorn.ConditionStatusTrue
	}
	return longhorn.ConditionStatusFalse
}
