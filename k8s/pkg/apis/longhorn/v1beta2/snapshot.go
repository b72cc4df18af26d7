package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SnapshotSpec is the desired state of a volume snapshot.
type SnapshotSpec struct {
	// The volume this snapshot belongs to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volume is immutable"
	Volume string `json:"volume"`
	// Whether the manager should create the snapshot in the engine. False
	// for objects that mirror a snapshot the engine already has.
	// +optional
	CreateSnapshot bool `json:"createSnapshot"`
	// Labels given to the snapshot when it is created.
	// +optional
	// +nullable
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="labels is immutable"
	Labels map[string]string `json:"labels"`
}

// SnapshotStatus mirrors the engine's view of the snapshot.
type SnapshotStatus struct {
	// +optional
	Parent string `json:"parent"`
	// +optional
	// +nullable
	Children map[string]bool `json:"children"`
	// +optional
	MarkRemoved bool `json:"markRemoved"`
	// +optional
	UserCreated bool `json:"userCreated"`
	// +optional
	CreationTime string `json:"creationTime"`
	// +optional
	Size int64 `json:"size"`
	// +optional
	// +nullable
	Labels map[string]string `json:"labels"`
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	Error string `json:"error,omitempty"`
	// +optional
	RestoreSize int64 `json:"restoreSize"`
	// +optional
	ReadyToUse bool `json:"readyToUse"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhsnap,categories=longhorn
// +kubebuilder:printcolumn:name="Volume",type=string,JSONPath=`.spec.volume`,description="The volume of the snapshot"
// +kubebuilder:printcolumn:name="CreationTime",type=string,JSONPath=`.status.creationTime`,description="When the snapshot was taken"
// +kubebuilder:printcolumn:name="ReadyToUse",type=boolean,JSONPath=`.status.readyToUse`,description="Whether the snapshot can be used"
// +kubebuilder:printcolumn:name="RestoreSize",type=string,JSONPath=`.status.restoreSize`,description="The size of a volume restored from the snapshot"
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.status.size`,description="The actual size of the snapshot"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Snapshot is a point-in-time copy of a volume, kept in its replicas.
type Snapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SnapshotSpec `json:"spec"`
	// +optional
	Status SnapshotStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SnapshotList is a list of Snapshots.
type SnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Snapshot `json:"items"`
}
