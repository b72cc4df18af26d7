package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ReplicaSpec is the desired state of one copy of a volume's data.
type ReplicaSpec struct {
	InstanceSpec `json:",inline"`
	// +optional
	EngineName string `json:"engineName"`
	// +optional
	HealthyAt string `json:"healthyAt"`
	// +optional
	FailedAt string `json:"failedAt"`
	// UUID of the disk that holds the replica's files.
	// +optional
	DiskID string `json:"diskID"`
	// +optional
	DiskPath string `json:"diskPath"`
	// +optional
	DataDirectoryName string `json:"dataDirectoryName"`
	// +optional
	BackingImage string `json:"backingImage"`
	// +optional
	Active bool `json:"active"`
	// +optional
	HardNodeAffinity string `json:"hardNodeAffinity"`
	// +optional
	RevisionCounterDisabled bool `json:"revisionCounterDisabled"`
	// +optional
	RebuildRetryCount int `json:"rebuildRetryCount"`
	// +optional
	EvictionRequested bool `json:"evictionRequested"`
}

// ReplicaStatus is the observed state of a replica.
type ReplicaStatus struct {
	InstanceStatus `json:",inline"`
	// +optional
	EvictionRequested bool `json:"evictionRequested"`
	// Conditions of the replica. Failed is True while spec.failedAt is
	// set: its reason and message say why the replica failed. The engine
	// does not open a failed replica; clearing spec.failedAt lets it
	// compare the replica's data with the others' again.
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
}

// The Replica's Failed condition: True once the replica failed
// (spec.failedAt), with the reason and the error.
const (
	ReplicaConditionTypeFailed = "Failed"
	// ReplicaConditionReasonIOError: an I/O of the replica failed while
	// its engine ran.
	ReplicaConditionReasonIOError = "ReplicaIOError"
	// ReplicaConditionReasonDataBehind: the engine found the replica's
	// data behind another replica's (it missed writes) when it started.
	ReplicaConditionReasonDataBehind = "DataBehind"
	// ReplicaConditionReasonNodeDown: the replica's node was down when
	// an engine of its volume started elsewhere, which started without it.
	ReplicaConditionReasonNodeDown = "NodeDown"
	// ReplicaConditionTypeDataDeleted: True once the replica's node
	// deleted its data, its volume being deleted; the manager deleting the
	// volume waits for it before the volume goes.
	ReplicaConditionTypeDataDeleted = "DataDeleted"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhr,categories=longhorn
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`,description="The current state of the replica"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node that the replica is on"
// +kubebuilder:printcolumn:name="Disk",type=string,JSONPath=`.spec.diskID`,description="The disk that the replica is on"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.currentImage`,description="The current image of the replica"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Replica is one copy of a volume's data on one disk.
type Replica struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ReplicaSpec `json:"spec,omitempty"`
	// +optional
	Status ReplicaStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ReplicaList is a list of Replicas.
type ReplicaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Replica `json:"items"`
}
