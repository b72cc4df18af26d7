package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ReplicaMode is the mode of a replica as its engine sees it.
// +kubebuilder:validation:Enum=RW;WO;ERR
type ReplicaMode string

const (
	ReplicaModeRW  ReplicaMode = "RW"
	ReplicaModeWO  ReplicaMode = "WO"
	ReplicaModeERR ReplicaMode = "ERR"
)

// SnapshotInfo is one snapshot in an engine's snapshot chain.
type SnapshotInfo struct {
	// +optional
	Name string `json:"name"`
	// +optional
	Parent string `json:"parent"`
	// +optional
	// +nullable
	Children map[string]bool `json:"children"`
	// +optional
	Removed bool `json:"removed"`
	// +optional
	UserCreated bool `json:"usercreated"`
	// +optional
	Created string `json:"created"`
	// +optional
	Size string `json:"size"`
	// +optional
	// +nullable
	Labels map[string]string `json:"labels"`
}

// EngineBackupStatus is the progress of one backup taken by an engine.
type EngineBackupStatus struct {
	// +optional
	Progress int `json:"progress"`
	// +optional
	BackupURL string `json:"backupURL,omitempty"`
	// +optional
	Error string `json:"error,omitempty"`
	// +optional
	SnapshotName string `json:"snapshotName"`
	// +optional
	State string `json:"state"`
	// +optional
	ReplicaAddress string `json:"replicaAddress"`
}

// RestoreStatus is the progress of a restore on one replica.
type RestoreStatus struct {
	// +optional
	IsRestoring bool `json:"isRestoring"`
	// +optional
	LastRestored string `json:"lastRestored"`
	// +optional
	CurrentRestoringBackup string `json:"currentRestoringBackup"`
	// +optional
	Progress int `json:"progress,omitempty"`
	// +optional
	Error string `json:"error,omitempty"`
	// +optional
	Filename string `json:"filename,omitempty"`
	// +optional
	State string `json:"state"`
	// +optional
	BackupURL string `json:"backupURL"`
}

// PurgeStatus is the progress of a snapshot purge on one replica.
type PurgeStatus struct {
	// +optional
	Error string `json:"error"`
	// +optional
	IsPurging bool `json:"isPurging"`
	// +optional
	Progress int `json:"progress"`
	// +optional
	State string `json:"state"`
}

// RebuildStatus is the progress of rebuilding one replica.
type RebuildStatus struct {
	// +optional
	Error string `json:"error"`
	// +optional
	IsRebuilding bool `json:"isRebuilding"`
	// +optional
	Progress int `json:"progress"`
	// +optional
	State string `json:"state"`
	// +optional
	FromReplicaAddress string `json:"fromReplicaAddress"`
}

// EngineSpec is the desired state of a volume's engine.
type EngineSpec struct {
	InstanceSpec `json:",inline"`
	// +optional
	Frontend VolumeFrontend `json:"frontend"`
	// +optional
	ReplicaAddressMap map[string]string `json:"replicaAddressMap"`
	// +optional
	UpgradedReplicaAddressMap map[string]string `json:"upgradedReplicaAddressMap"`
	// +optional
	BackupVolume string `json:"backupVolume"`
	// +optional
	RequestedBackupRestore string `json:"requestedBackupRestore"`
	// +optional
	RequestedDataSource string `json:"requestedDataSource"`
	// +optional
	DisableFrontend bool `json:"disableFrontend"`
	// +optional
	RevisionCounterDisabled bool `json:"revisionCounterDisabled"`
	// +optional
	Active bool `json:"active"`
}

// EngineStatus is the observed state of an engine.
type EngineStatus struct {
	InstanceStatus `json:",inline"`
	// +kubebuilder:validation:Type=string
	// +optional
	CurrentSize int64 `json:"currentSize,string"`
	// +optional
	// +nullable
	CurrentReplicaAddressMap map[string]string `json:"currentReplicaAddressMap"`
	// +optional
	// +nullable
	ReplicaModeMap map[string]ReplicaMode `json:"replicaModeMap"`
	// +optional
	Endpoint string `json:"endpoint"`
	// +optional
	LastRestoredBackup string `json:"lastRestoredBackup"`
	// +optional
	// +nullable
	BackupStatus map[string]*EngineBackupStatus `json:"backupStatus"`
	// +optional
	// +nullable
	RestoreStatus map[string]*RestoreStatus `json:"restoreStatus"`
	// +optional
	// +nullable
	PurgeStatus map[string]*PurgeStatus `json:"purgeStatus"`
	// +optional
	// +nullable
	RebuildStatus map[string]*RebuildStatus `json:"rebuildStatus"`
	// The engine's snapshot chain by snapshot name, volume-head included.
	// +optional
	// +nullable
	Snapshots map[string]*SnapshotInfo `json:"snapshots"`
	// +optional
	SnapshotsError string `json:"snapshotsError"`
	// +optional
	IsExpanding bool `json:"isExpanding"`
	// +optional
	LastExpansionError string `json:"lastExpansionError"`
	// +optional
	LastExpansionFailedAt string `json:"lastExpansionFailedAt"`
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhe,categories=longhorn
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.currentState`,description="The current state of the engine"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node that the engine is on"
// +kubebuilder:printcolumn:name="InstanceManager",type=string,JSONPath=`.status.instanceManagerName`,description="The instance manager of the engine"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.currentImage`,description="The current image of the engine"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Engine is the controller process of a volume: it serves the frontend and
// fans writes out to the volume's replicas.
type Engine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec EngineSpec `json:"spec,omitempty"`
	// +optional
	Status EngineStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// EngineList is a list of Engines.
type EngineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Engine `json:"items"`
}
