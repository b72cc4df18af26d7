package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SystemBackupState is where a SystemBackup is on its way, Longhorn's
// states.
type SystemBackupState string

// A SystemBackup's states, its condition and its reasons, as Longhorn's.
const (
	SystemBackupStateDeleting           = SystemBackupState("Deleting")
	SystemBackupStateError              = SystemBackupState("Error")
	SystemBackupStateGenerating         = SystemBackupState("Generating")
	SystemBackupStateNone               = SystemBackupState("")
	SystemBackupStateReady              = SystemBackupState("Ready")
	SystemBackupStateSyncing            = SystemBackupState("Syncing")
	SystemBackupStateUploading          = SystemBackupState("Uploading")
	SystemBackupStateVolumeBackup       = SystemBackupState("CreatingVolumeBackups")
	SystemBackupStateBackingImageBackup = SystemBackupState("CreatingBackingImageBackups")

	SystemBackupConditionTypeError = "Error"

	SystemBackupConditionReasonDelete   = "Delete"
	SystemBackupConditionReasonGenerate = "Generate"
	SystemBackupConditionReasonUpload   = "Upload"
	SystemBackupConditionReasonSync     = "Sync"
)

// SystemBackupCreateVolumeBackupPolicy says which volumes a system backup
// backs up first.
type SystemBackupCreateVolumeBackupPolicy string

// The volume backup policies, as Longhorn's: a backup of each volume that
// has none of its current data (if-not-present), of every volume (always),
// or none (disabled).
const (
	SystemBackupCreateVolumeBackupPolicyAlways       = SystemBackupCreateVolumeBackupPolicy("always")
	SystemBackupCreateVolumeBackupPolicyDisabled     = SystemBackupCreateVolumeBackupPolicy("disabled")
	SystemBackupCreateVolumeBackupPolicyIfNotPresent = SystemBackupCreateVolumeBackupPolicy("if-not-present")
)

// SystemBackupSpec is what a system backup takes.
type SystemBackupSpec struct {
	// Which volumes are backed up first: "if-not-present" (the default),
	// "always" or "disabled".
	// +optional
	// +nullable
	// +kubebuilder:validation:Enum="";if-not-present;always;disabled
	VolumeBackupPolicy SystemBackupCreateVolumeBackupPolicy `json:"volumeBackupPolicy"`
}

// SystemBackupStatus is where the system backup is.
type SystemBackupStatus struct {
	// The node whose manager makes or syncs this system backup.
	// +optional
	OwnerID string `json:"ownerID"`
	// The Longhorn version the archive was made by.
	// +optional
	// +nullable
	Version string `json:"version"`
	// The manager's git commit the archive was made by.
	// +optional
	// +nullable
	GitCommit string `json:"gitCommit"`
	// The manager image the archive was made by.
	// +optional
	ManagerImage string `json:"managerImage"`
	// +optional
	State SystemBackupState `json:"state"`
	// Error, True with the reason when the backup failed.
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
	// When the archive was made.
	// +optional
	CreatedAt metav1.Time `json:"createdAt"`
	// When the archive was last found in the backup target.
	// +optional
	// +nullable
	LastSyncedAt metav1.Time `json:"lastSyncedAt"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=lhsb,categories=longhorn
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`,description="The system backup Longhorn version"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="The system backup state"
// +kubebuilder:printcolumn:name="Created",type=string,JSONPath=`.status.createdAt`,description="The system backup creation time"
// +kubebuilder:printcolumn:name="LastSyncedAt",type=string,JSONPath=`.status.lastSyncedAt`,description="The last time that the system backup was synced into the cluster"

// SystemBackup is an archive of Longhorn's own objects in the default
// backup target, with the volume backups its policy asks for.
type SystemBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SystemBackupSpec `json:"spec,omitempty"`
	// +optional
	Status SystemBackupStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SystemBackupList is a list of SystemBackups.
type SystemBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SystemBackup `json:"items"`
}
