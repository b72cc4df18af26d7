package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BackingImageState is the state of one backing image file, on one disk
// or in the data source that prepares the first one.
// +kubebuilder:validation:Enum=pending;starting;in-progress;ready-for-transfer;ready;failed;unknown
type BackingImageState string

const (
	BackingImageStatePending          BackingImageState = "pending"
	BackingImageStateStarting         BackingImageState = "starting"
	BackingImageStateInProgress       BackingImageState = "in-progress"
	BackingImageStateReadyForTransfer BackingImageState = "ready-for-transfer"
	BackingImageStateReady            BackingImageState = "ready"
	BackingImageStateFailed           BackingImageState = "failed"
	BackingImageStateUnknown          BackingImageState = "unknown"
)

// BackingImageDataSourceType is where the first file of a backing image
// comes from.
// +kubebuilder:validation:Enum=download;upload;export-from-volume
type BackingImageDataSourceType string

const (
	BackingImageDataSourceTypeDownload         BackingImageDataSourceType = "download"
	BackingImageDataSourceTypeUpload           BackingImageDataSourceType = "upload"
	BackingImageDataSourceTypeExportFromVolume BackingImageDataSourceType = "export-from-volume"
)

// The keys of sourceParameters.
const (
	// DataSourceParameterURL is the URL a download fetches (http or https).
	DataSourceParameterURL = "url"
	// DataSourceParameterVolumeName is the volume an export reads.
	DataSourceParameterVolumeName = "volume-name"
	// DataSourceParameterSnapshotName is the snapshot of that volume an
	// export reads; the controller fills it in.
	DataSourceParameterSnapshotName = "snapshot-name"
	// DataSourceParameterExportType is the format an export writes: raw
	// (the default) or qcow2.
	DataSourceParameterExportType = "export-type"
)

// The values of the export-type source parameter.
const (
	ExportTypeRaw   = "raw"
	ExportTypeQCOW2 = "qcow2"
)

// BackingImageSpec is the desired state of a backing image: where its
// data comes from, what it must hash to, and which disks keep a file.
//
// +kubebuilder:validation:XValidation:rule="self.sourceType != 'download' || (has(self.sourceParameters) && 'url' in self.sourceParameters && self.sourceParameters['url'].matches('^https?://.+'))",message="sourceParameters.url must be an http or https URL when sourceType is download"
// +kubebuilder:validation:XValidation:rule="self.sourceType != 'export-from-volume' || (has(self.sourceParameters) && 'volume-name' in self.sourceParameters && self.sourceParameters['volume-name'] != \"\")",message="sourceParameters.volume-name is required when sourceType is export-from-volume"
// +kubebuilder:validation:XValidation:rule="!has(self.sourceParameters) || !('export-type' in self.sourceParameters) || self.sourceParameters['export-type'] in ['raw', 'qcow2']",message="sourceParameters.export-type must be raw or qcow2"
// +kubebuilder:validation:XValidation:rule="(has(self.sourceParameters) ? self.sourceParameters : {}) == (has(oldSelf.sourceParameters) ? oldSelf.sourceParameters : {})",message="sourceParameters is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.checksum) ? self.checksum : \"\") == (has(oldSelf.checksum) ? oldSelf.checksum : \"\")",message="checksum is immutable"
type BackingImageSpec struct {
	// Where the first file comes from; fixed at creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sourceType is immutable"
	SourceType BackingImageDataSourceType `json:"sourceType"`
	// The source's parameters: url for download; volume-name and
	// export-type (raw or qcow2, raw when absent) for export-from-volume.
	// Fixed at creation.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	SourceParameters map[string]string `json:"sourceParameters,omitempty"`
	// The expected SHA512 of the file, in lower-case hex; a file that
	// hashes to anything else is failed, never ready. Fixed at creation.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{128}$`
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// The disks (by UUID) that must hold a file of the image. The values
	// are unused and kept empty, as in Longhorn.
	// +optional
	Disks map[string]string `json:"disks,omitempty"`
	// How many ready copies cleanup keeps, however long they are unused.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	MinNumberOfCopies int `json:"minNumberOfCopies,omitempty"`
}

// BackingImageDiskFileStatus is the state of a backing image's file on
// one disk.
type BackingImageDiskFileStatus struct {
	// +optional
	State BackingImageState `json:"state,omitempty"`
	// Percent of the file prepared, 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Progress int `json:"progress"`
	// Why the file is in its state, when it is not ready.
	// +optional
	Message string `json:"message"`
	// When the state last changed (RFC 3339).
	// +optional
	LastStateTransitionTime string `json:"lastStateTransitionTime"`
}

// BackingImageStatus is the observed state of a backing image.
type BackingImageStatus struct {
	// The node whose manager reconciles the image.
	// +optional
	OwnerID string `json:"ownerID"`
	// Set once by the controller before anything else, so that a new image
	// with an old image's name never picks up the old image's files.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	UUID string `json:"uuid"`
	// The file's size in bytes, once known.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Size int64 `json:"size"`
	// The size of the disk the image holds, from a ready file: the file's
	// size for a raw image, the header's virtual size for a qcow2 one. A
	// volume on the image must be at least this large. 0 while unknown.
	// +kubebuilder:validation:Minimum=0
	// +optional
	VirtualSize int64 `json:"virtualSize"`
	// The SHA512 of the first file prepared.
	// +optional
	Checksum string `json:"checksum"`
	// Disk UUID to the state of the image's file on that disk.
	// +optional
	// +nullable
	DiskFileStatusMap map[string]*BackingImageDiskFileStatus `json:"diskFileStatusMap"`
	// Disk UUID to when the file on it was last seen unused (RFC 3339);
	// absent while a replica on the disk uses it.
	// +optional
	// +nullable
	DiskLastRefAtMap map[string]string `json:"diskLastRefAtMap"`
	// Observations of the image: DeletionBlocked while a deleted image
	// is kept because replicas use it (the message names their volumes),
	// Redownload when the file had to be fetched again.
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhbi,categories=longhorn
// +kubebuilder:printcolumn:name="UUID",type=string,JSONPath=`.status.uuid`,description="The UUID of the backing image"
// +kubebuilder:printcolumn:name="SourceType",type=string,JSONPath=`.spec.sourceType`,description="Where the first file comes from"
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`,description="The size of the file in bytes"
// +kubebuilder:printcolumn:name="VirtualSize",type=integer,JSONPath=`.status.virtualSize`,description="The size of the disk the image holds, in bytes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BackingImage is a raw or qcow2 image that volumes start from, kept as
// one file on every disk whose replicas use it.
type BackingImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackingImageSpec `json:"spec"`
	// +optional
	Status BackingImageStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BackingImageList is a list of BackingImages.
type BackingImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackingImage `json:"items"`
}
