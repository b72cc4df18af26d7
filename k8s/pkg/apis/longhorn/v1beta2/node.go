package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DiskType is the kind of storage a disk offers.
// +kubebuilder:validation:Enum=filesystem;block
type DiskType string

const (
	DiskTypeFilesystem DiskType = "filesystem"
	DiskTypeBlock      DiskType = "block"
)

// Node and disk condition types and reasons.
const (
	NodeConditionReasonManagerPodMissing = "ManagerPodMissing"
	NodeConditionReasonManagerRunning    = "ManagerRunning"
	NodeConditionReasonManagerStale      = "ManagerHeartbeatStale"

	DiskConditionReasonDiskReady        = "DiskReady"
	DiskConditionReasonDiskPathMissing  = "DiskPathMissing"
	DiskConditionReasonDiskUUIDMismatch = "DiskUUIDMismatch"
	DiskConditionReasonDiskFilesystem   = "DiskFilesystemError"
)

// DiskSpec is a disk the user gives Longhorn on a node.
type DiskSpec struct {
	// +kubebuilder:default=filesystem
	// +optional
	Type DiskType `json:"diskType,omitempty"`
	// Absolute path of the disk's folder on the node.
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`
	// +optional
	AllowScheduling bool `json:"allowScheduling"`
	// +optional
	EvictionRequested bool `json:"evictionRequested"`
	// Bytes kept free for other uses.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StorageReserved int64 `json:"storageReserved"`
	// +optional
	Tags []string `json:"tags"`
}

// DiskStatus is what the manager observes of a disk.
type DiskStatus struct {
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
	// Free bytes on the disk's filesystem.
	// +optional
	StorageAvailable int64 `json:"storageAvailable"`
	// Bytes promised to scheduled replicas.
	// +optional
	StorageScheduled int64 `json:"storageScheduled"`
	// Size of the disk's filesystem in bytes.
	// +optional
	StorageMaximum int64 `json:"storageMaximum"`
	// +optional
	// +nullable
	ScheduledReplica map[string]int64 `json:"scheduledReplica"`
	// The disk's identity, kept in a file on the disk so it survives
	// restarts and is not confused with another disk mounted at the path.
	// +optional
	DiskUUID string `json:"diskUUID"`
	// +optional
	Type DiskType `json:"diskType,omitempty"`
}

// NodeSpec is the desired configuration of a Longhorn node.
type NodeSpec struct {
	// +optional
	Name string `json:"name"`
	// Disks by name.
	// +optional
	Disks map[string]DiskSpec `json:"disks"`
	// +optional
	AllowScheduling bool `json:"allowScheduling"`
	// +optional
	EvictionRequested bool `json:"evictionRequested"`
	// +optional
	Tags []string `json:"tags"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	InstanceManagerCPURequest int `json:"instanceManagerCPURequest"`
}

// NodeStatus is what the manager observes of a node.
type NodeStatus struct {
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
	// +optional
	// +nullable
	DiskStatus map[string]*DiskStatus `json:"diskStatus"`
	// +optional
	Region string `json:"region"`
	// +optional
	Zone string `json:"zone"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhn,categories=longhorn
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].status`,description="Whether the node is ready"
// +kubebuilder:printcolumn:name="AllowScheduling",type=boolean,JSONPath=`.spec.allowScheduling`,description="Whether replicas may be scheduled on the node"
// +kubebuilder:printcolumn:name="Schedulable",type=string,JSONPath=`.status.conditions[?(@.type=='Schedulable')].status`,description="Whether the node is schedulable"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Node is a Kubernetes node that runs a Longhorn manager, with its disks.
type Node struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec NodeSpec `json:"spec,omitempty"`
	// +optional
	Status NodeStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NodeList is a list of Nodes.
type NodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Node `json:"items"`
}
