package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// InstanceManagerState is the state of a node's instance manager.
// +kubebuilder:validation:Enum=starting;running;stopped;error;unknown
type InstanceManagerState string

const (
	// InstanceManagerStateStarting: its pod is made and does not answer
	// yet.
	InstanceManagerStateStarting InstanceManagerState = "starting"
	// InstanceManagerStateRunning: it answers, and the manager follows
	// what it runs.
	InstanceManagerStateRunning InstanceManagerState = "running"
	// InstanceManagerStateStopped: it has no pod.
	InstanceManagerStateStopped InstanceManagerState = "stopped"
	// InstanceManagerStateError: its pod ended; it is made again.
	InstanceManagerStateError InstanceManagerState = "error"
	// InstanceManagerStateUnknown: its pod runs but it does not answer,
	// or its node's manager is away.
	InstanceManagerStateUnknown InstanceManagerState = "unknown"
)

// InstanceManagerType is what an instance manager runs. There is one kind,
// Longhorn's "aio": engines and replicas in one process.
// +kubebuilder:validation:Enum=aio
type InstanceManagerType string

const InstanceManagerTypeAllInOne InstanceManagerType = "aio"

// InstanceManagerSpec is the desired state of a node's instance manager:
// the process, in a pod of its own, that runs the engines of the volumes
// attached to the node (docs/data-plane.md, "Where the engines run").
type InstanceManagerSpec struct {
	// The image its pod runs; an instance manager of another image is
	// another object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="image is immutable"
	Image string `json:"image"`
	// The node it runs on.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeID is immutable"
	NodeID string `json:"nodeID"`
	// +kubebuilder:default=aio
	// +optional
	Type InstanceManagerType `json:"type,omitempty"`
	// +kubebuilder:default=v1
	// +optional
	DataEngine DataEngineType `json:"dataEngine,omitempty"`
}

// InstanceProcessSpec names an instance an instance manager runs.
type InstanceProcessSpec struct {
	// The instance's name: for an engine, its Engine object's.
	// +optional
	Name string `json:"name"`
	// The volume it serves.
	// +optional
	VolumeName string `json:"volumeName,omitempty"`
}

// InstanceProcessStatus is the observed state of an instance.
type InstanceProcessStatus struct {
	// +optional
	State InstanceState `json:"state,omitempty"`
	// The instance's id in its instance manager: a new one each time it
	// is started.
	// +optional
	ID string `json:"id,omitempty"`
	// The frontend's NBD URI, when it has one.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// +optional
	ErrorMsg string `json:"errorMsg,omitempty"`
}

// InstanceProcess is one instance an instance manager runs.
type InstanceProcess struct {
	// +optional
	Spec InstanceProcessSpec `json:"spec"`
	// +optional
	Status InstanceProcessStatus `json:"status"`
}

// InstanceManagerStatus is the observed state of an instance manager and
// what it runs, written by its node's manager.
type InstanceManagerStatus struct {
	// The node whose manager writes this status.
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	CurrentState InstanceManagerState `json:"currentState,omitempty"`
	// Why it is in its state, when it is not running.
	// +optional
	Message string `json:"message,omitempty"`
	// Its pod's IP.
	// +optional
	IP string `json:"ip"`
	// How many times the manager has made its pod again after it ended.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodRestarts int `json:"podRestarts,omitempty"`
	// The engines it runs, by Engine name.
	// +optional
	// +nullable
	InstanceEngines map[string]InstanceProcess `json:"instanceEngines,omitempty"`
	// The replicas it runs, by Replica name. Empty while replicas are
	// opened by the engines that use them, in the same process.
	// +optional
	// +nullable
	InstanceReplicas map[string]InstanceProcess `json:"instanceReplicas,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhim,categories=longhorn
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`,description="The state of the instance manager"
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`,description="What it runs"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node it runs on"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,description="The image its pod runs",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// InstanceManager is a node's instance manager: the pod that runs the
// engines of the volumes attached to the node, apart from the manager, so
// that the manager's restart, upgrade or crash stops no volume.
type InstanceManager struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec InstanceManagerSpec `json:"spec"`
	// +optional
	Status InstanceManagerStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// InstanceManagerList is a list of InstanceManagers.
type InstanceManagerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InstanceManager `json:"items"`
}
