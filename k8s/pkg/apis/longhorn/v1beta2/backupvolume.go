package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BackupVolumeSpec is the desired state of a backup volume.
type BackupVolumeSpec struct {
	// When the manager should next read the backup volume from the target.
	// +optional
	// +nullable
	SyncRequestedAt metav1.Time `json:"syncRequestedAt"`
	// The BackupTarget the backup volume is in; empty (an object made
	// before there were several targets) is "default".
	// +optional
	BackupTargetName string `json:"backupTargetName"`
	// The volume whose backups these are; empty (an object made before
	// there were several targets) is the object's name.
	// +optional
	VolumeName string `json:"volumeName"`
}

// BackupVolumeStatus is what the backup target holds for one volume.
type BackupVolumeStatus struct {
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	LastModificationTime metav1.Time `json:"lastModificationTime"`
	// +optional
	Size string `json:"size"`
	// +optional
	// +nullable
	Labels map[string]string `json:"labels"`
	// +optional
	CreatedAt string `json:"createdAt"`
	// +optional
	LastBackupName string `json:"lastBackupName"`
	// +optional
	LastBackupAt string `json:"lastBackupAt"`
	// +optional
	DataStored string `json:"dataStored"`
	// +optional
	// +nullable
	Messages map[string]string `json:"messages"`
	// +optional
	BackingImageName string `json:"backingImageName"`
	// +optional
	BackingImageChecksum string `json:"backingImageChecksum"`
	// +optional
	// +nullable
	LastSyncedAt metav1.Time `json:"lastSyncedAt"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhbv,categories=longhorn
// +kubebuilder:printcolumn:name="BackupTarget",type=string,JSONPath=`.spec.backupTargetName`,description="The backup target name"
// +kubebuilder:printcolumn:name="VolumeName",type=string,JSONPath=`.spec.volumeName`,description="The volume name"
// +kubebuilder:printcolumn:name="CreatedAt",type=string,JSONPath=`.status.createdAt`,description="When the backup volume was created"
// +kubebuilder:printcolumn:name="LastBackupName",type=string,JSONPath=`.status.lastBackupName`,description="The newest backup of the volume"
// +kubebuilder:printcolumn:name="LastBackupAt",type=string,JSONPath=`.status.lastBackupAt`,description="When the newest backup was taken"
// +kubebuilder:printcolumn:name="LastSyncedAt",type=string,JSONPath=`.status.lastSyncedAt`,description="When the backup volume was last read from the target"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BackupVolume is the set of backups of one volume in the backup target.
type BackupVolume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec BackupVolumeSpec `json:"spec,omitempty"`
	// +optional
	Status BackupVolumeStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BackupVolumeList is a list of BackupVolumes.
type BackupVolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupVolume `json:"items"`
}
