package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BackupState is the progress of a backup.
// +kubebuilder:validation:Enum=New;Pending;InProgress;Completed;Error;Unknown;""
type BackupState string

const (
	BackupStateNew        BackupState = "New"
	BackupStatePending    BackupState = "Pending"
	BackupStateInProgress BackupState = "InProgress"
	BackupStateCompleted  BackupState = "Completed"
	BackupStateError      BackupState = "Error"
	BackupStateUnknown    BackupState = "Unknown"
)

// BackupSpec is the desired state of a backup.
type BackupSpec struct {
	// When the manager should next read the backup from the target.
	// +optional
	// +nullable
	SyncRequestedAt metav1.Time `json:"syncRequestedAt"`
	// The snapshot to back up; empty for a backup found in the target.
	// +optional
	SnapshotName string `json:"snapshotName"`
	// +optional
	// +nullable
	Labels map[string]string `json:"labels"`
}

// BackupStatus is the observed state of a backup.
type BackupStatus struct {
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	State BackupState `json:"state"`
	// +optional
	Progress int `json:"progress"`
	// +optional
	URL string `json:"url"`
	// +optional
	SnapshotName string `json:"snapshotName"`
	// +optional
	SnapshotCreatedAt string `json:"snapshotCreatedAt"`
	// +optional
	BackupCreatedAt string `json:"backupCreatedAt"`
	// +optional
	Size string `json:"size"`
	// +optional
	// +nullable
	Labels map[string]string `json:"labels"`
	// +optional
	// +nullable
	Messages map[string]string `json:"messages"`
	// +optional
	VolumeName string `json:"volumeName"`
	// +optional
	VolumeSize string `json:"volumeSize"`
	// +optional
	VolumeCreated string `json:"volumeCreated"`
	// +optional
	VolumeBackingImageName string `json:"volumeBackingImageName"`
	// +optional
	// +nullable
	LastSyncedAt metav1.Time `json:"lastSyncedAt"`
	// +optional
	Error string `json:"error,omitempty"`
	// +optional
	ReplicaAddress string `json:"replicaAddress,omitempty"`
	// BackupMode is what the backup was, as its record in the target says:
	// "full" (every block stored, uploaded again where the target had it;
	// also a volume's first backup) or "incremental".
	// +optional
	BackupMode string `json:"backupMode,omitempty"`
	// NewlyUploadedDataSize is the bytes (as stored) the backup uploaded
	// that the target did not hold; ReUploadedDataSize those a full backup
	// uploaded again. Longhorn's names.
	// +optional
	NewlyUploadedDataSize string `json:"newlyUploadDataSize,omitempty"`
	// +optional
	ReUploadedDataSize string `json:"reUploadedDataSize,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhb,categories=longhorn
// +kubebuilder:printcolumn:name="SnapshotName",type=string,JSONPath=`.status.snapshotName`,description="The snapshot the backup was taken from"
// +kubebuilder:printcolumn:name="SnapshotSize",type=string,JSONPath=`.status.size`,description="The size of the backed-up snapshot"
// +kubebuilder:printcolumn:name="SnapshotCreatedAt",type=string,JSONPath=`.status.snapshotCreatedAt`,description="When the snapshot was taken"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="The state of the backup"
// +kubebuilder:printcolumn:name="LastSyncedAt",type=string,JSONPath=`.status.lastSyncedAt`,description="When the backup was last read from the target"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Backup is a copy of one snapshot of a volume in the backup target.
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec BackupSpec `json:"spec,omitempty"`
	// +optional
	Status BackupStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BackupList is a list of Backups.
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}
