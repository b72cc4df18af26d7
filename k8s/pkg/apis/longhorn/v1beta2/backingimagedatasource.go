package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BackingImageDataSourceSpec is the desired state of the server that
// prepares a backing image's first file. There is one per BackingImage,
// named after it, created with it and deleted before it.
//
// +kubebuilder:validation:XValidation:rule="(has(self.parameters) ? self.parameters : {}) == (has(oldSelf.parameters) ? oldSelf.parameters : {})",message="parameters is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.checksum) ? self.checksum : \"\") == (has(oldSelf.checksum) ? oldSelf.checksum : \"\")",message="checksum is immutable"
type BackingImageDataSourceSpec struct {
	// The UUID of the backing image (its status.uuid) the file is for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="uuid is immutable"
	UUID string `json:"uuid"`
	// The node that runs the server.
	// +kubebuilder:validation:MinLength=1
	NodeID string `json:"nodeID"`
	// The disk (by UUID) the file is prepared on.
	// +kubebuilder:validation:MinLength=1
	DiskUUID string `json:"diskUUID"`
	// That disk's path on the node.
	// +kubebuilder:validation:MinLength=1
	DiskPath string `json:"diskPath"`
	// Where the file comes from; fixed at creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sourceType is immutable"
	SourceType BackingImageDataSourceType `json:"sourceType"`
	// The source's parameters, as in the BackingImage; fixed at creation.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
	// The expected SHA512 of the file, from the BackingImage.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{128}$`
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// Set once a backing image manager has taken the file, so the server
	// stops.
	// +optional
	FileTransferred bool `json:"fileTransferred"`
}

// BackingImageDataSourceStatus is the observed state of the data source
// server and the file it prepares.
type BackingImageDataSourceStatus struct {
	// The node whose manager reconciles the data source.
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	CurrentState BackingImageState `json:"currentState,omitempty"`
	// The file's size in bytes, once known.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Size int64 `json:"size"`
	// Percent of the file prepared, 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Progress int `json:"progress"`
	// The SHA512 of the file, once complete.
	// +optional
	Checksum string `json:"checksum"`
	// Why the data source is in its state; for a failed server, its error
	// and last log lines.
	// +optional
	Message string `json:"message"`
	// The parameters the running server was started with; empty while no
	// server runs.
	// +optional
	// +nullable
	RunningParameters map[string]string `json:"runningParameters"`
	// The address (IP) the server answers on.
	// +optional
	IP string `json:"ip"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhbids,categories=longhorn
// +kubebuilder:printcolumn:name="UUID",type=string,JSONPath=`.spec.uuid`,description="The UUID of the backing image"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`,description="The state of the file being prepared"
// +kubebuilder:printcolumn:name="SourceType",type=string,JSONPath=`.spec.sourceType`,description="Where the file comes from"
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`,description="The size of the file in bytes"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node the server runs on"
// +kubebuilder:printcolumn:name="DiskUUID",type=string,JSONPath=`.spec.diskUUID`,description="The disk the file is prepared on"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BackingImageDataSource is the server that prepares the first file of a
// backing image: by download, upload or export from a volume.
type BackingImageDataSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackingImageDataSourceSpec `json:"spec"`
	// +optional
	Status BackingImageDataSourceStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BackingImageDataSourceList is a list of BackingImageDataSources.
type BackingImageDataSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackingImageDataSource `json:"items"`
}
