package v1beta2

// InstanceState is the state of an engine or replica process.
// +kubebuilder:validation:Enum=error;stopped;starting;running;stopping;unknown
type InstanceState string

const (
	InstanceStateRunning  InstanceState = "running"
	InstanceStateStopped  InstanceState = "stopped"
	InstanceStateError    InstanceState = "error"
	InstanceStateStarting InstanceState = "starting"
	InstanceStateStopping InstanceState = "stopping"
	InstanceStateUnknown  InstanceState = "unknown"
)

// DataEngineType is the data path implementation of a volume.
// +kubebuilder:validation:Enum=v1;v2
type DataEngineType string

const (
	DataEngineTypeV1 DataEngineType = "v1"
	DataEngineTypeV2 DataEngineType = "v2"
)

// InstanceSpec is what engines and replicas share in their spec.
type InstanceSpec struct {
	// +optional
	VolumeName string `json:"volumeName"`
	// +kubebuilder:validation:Type=string
	// +optional
	VolumeSize int64 `json:"volumeSize,string"`
	// +optional
	NodeID string `json:"nodeID"`
	// +optional
	Image string `json:"image"`
	// +optional
	DesireState InstanceState `json:"desireState,omitempty"`
	// +optional
	LogRequested bool `json:"logRequested"`
	// +optional
	SalvageRequested bool `json:"salvageRequested"`
	// +optional
	DataEngine DataEngineType `json:"dataEngine,omitempty"`
}

// InstanceStatus is what engines and replicas share in their status.
type InstanceStatus struct {
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	InstanceManagerName string `json:"instanceManagerName"`
	// +optional
	CurrentState InstanceState `json:"currentState,omitempty"`
	// +optional
	CurrentImage string `json:"currentImage"`
	// +optional
	IP string `json:"ip"`
	// +optional
	StorageIP string `json:"storageIP"`
	// +optional
	Port int `json:"port"`
	// +optional
	Started bool `json:"started"`
	// +optional
	LogFetched bool `json:"logFetched"`
	// +optional
	SalvageExecuted bool `json:"salvageExecuted"`
}
