package v1beta2

// ConditionStatus is the status of a condition: True, False or Unknown.
// +kubebuilder:validation:Enum=True;False;Unknown
type ConditionStatus string

const (
	ConditionStatusTrue    ConditionStatus = "True"
	ConditionStatusFalse   ConditionStatus = "False"
	ConditionStatusUnknown ConditionStatus = "Unknown"
)

// Condition is an observation of one aspect of an object's state, in the
// shape Longhorn uses for nodes, disks, volumes and engines.
type Condition struct {
	// Type of the condition, such as Ready or Schedulable.
	Type string `json:"type"`
	// Status of the condition.
	Status ConditionStatus `json:"status"`
	// Last time the condition was probed.
	// +optional
	LastProbeTime string `json:"lastProbeTime,omitempty"`
	// Last time the condition changed from one status to another.
	// +optional
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	// Machine-readable reason for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Human-readable details of the last transition.
	// +optional
	Message string `json:"message,omitempty"`
}

// Condition types shared by several resources.
const (
	ConditionTypeReady       = "Ready"
	ConditionTypeSchedulable = "Schedulable"
)
