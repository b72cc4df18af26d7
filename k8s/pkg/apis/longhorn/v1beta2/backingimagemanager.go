package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BackingImageManagerState is the state of a backing image manager server.
// +kubebuilder:validation:Enum=starting;running;stopped;error;unknown
type BackingImageManagerState string

const (
	BackingImageManagerStateStarting BackingImageManagerState = "starting"
	BackingImageManagerStateRunning  BackingImageManagerState = "running"
	BackingImageManagerStateStopped  BackingImageManagerState = "stopped"
	BackingImageManagerStateError    BackingImageManagerState = "error"
	BackingImageManagerStateUnknown  BackingImageManagerState = "unknown"
)

// BackingImageManagerSpec is the desired state of the server that keeps
// the backing image files of one disk.
type BackingImageManagerSpec struct {
	// The image the server runs from; a manager from an old image is
	// replaced by a new object, so it is fixed at creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="image is immutable"
	// +optional
	Image string `json:"image"`
	// The node of the disk.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeID is immutable"
	NodeID string `json:"nodeID"`
	// The disk's UUID, as its longhorn-disk.cfg records it; the server
	// touches no file on a disk with another UUID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="diskUUID is immutable"
	DiskUUID string `json:"diskUUID"`
	// The disk's path on the node.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="diskPath is immutable"
	DiskPath string `json:"diskPath"`
	// Backing image name to UUID: the files the manager must keep.
	// +optional
	BackingImages map[string]string `json:"backingImages,omitempty"`
}

// BackingImageFileInfo is the state of one file a manager keeps.
type BackingImageFileInfo struct {
	// +optional
	Name string `json:"name"`
	// +optional
	UUID string `json:"uuid"`
	// +optional
	State BackingImageState `json:"state,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	Size int64 `json:"size"`
	// The size of the disk the ready file holds: the file's size for a raw
	// image, the header's virtual size for a qcow2 one; 0 while unknown or
	// when volumes cannot use the file.
	// +kubebuilder:validation:Minimum=0
	// +optional
	VirtualSize int64 `json:"virtualSize"`
	// Percent of the file received, 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Progress int `json:"progress"`
	// The SHA512 of the file, once complete.
	// +optional
	CurrentChecksum string `json:"currentChecksum"`
	// Why the file is in its state, when it is not ready.
	// +optional
	Message string `json:"message"`
}

// BackingImageManagerStatus is the observed state of a manager and its
// files.
type BackingImageManagerStatus struct {
	// The node whose manager reconciles this object.
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	CurrentState BackingImageManagerState `json:"currentState,omitempty"`
	// The address (IP) the server answers on.
	// +optional
	IP string `json:"ip"`
	// The range of the gRPC API versions the server speaks.
	// +optional
	APIMinVersion int `json:"apiMinVersion"`
	// +optional
	APIVersion int `json:"apiVersion"`
	// Backing image name to the state of its file on this disk.
	// +optional
	// +nullable
	BackingImageFileMap map[string]BackingImageFileInfo `json:"backingImageFileMap"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhbim,categories=longhorn
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`,description="The state of the manager"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,description="The image the manager runs from"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node of the disk"
// +kubebuilder:printcolumn:name="DiskUUID",type=string,JSONPath=`.spec.diskUUID`,description="The disk the manager keeps files on"
// +kubebuilder:printcolumn:name="DiskPath",type=string,JSONPath=`.spec.diskPath`,description="The disk's path on the node"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BackingImageManager keeps the backing image files of one disk.
type BackingImageManager struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackingImageManagerSpec `json:"spec"`
	// +optional
	Status BackingImageManagerStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BackingImageManagerList is a list of BackingImageManagers.
type BackingImageManagerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackingImageManager `json:"items"`
}
