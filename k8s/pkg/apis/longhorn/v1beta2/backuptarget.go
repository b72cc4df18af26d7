package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The condition a BackupTarget's poll sets, as Longhorn's: True while the
// target cannot be read, with the reason in its message.
const (
	BackupTargetConditionTypeUnavailable   = "Unavailable"
	BackupTargetConditionReasonUnavailable = "Unavailable"
)

// BackupTargetSpec is where backups go and how often the target is read.
type BackupTargetSpec struct {
	// The URL backups are stored at: s3://, nfs://, cifs://, azblob:// or
	// file://; empty for none.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^(s3|nfs|cifs|azblob|file)://')",message="backupTargetURL must be empty or start with s3://, nfs://, cifs://, azblob:// or file://"
	BackupTargetURL string `json:"backupTargetURL"`
	// The Secret, in the manager's namespace, holding the target's
	// credential.
	// +optional
	CredentialSecret string `json:"credentialSecret"`
	// How often the whole target is read (a duration, "300s"); 0 turns
	// polling off.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('-')",message="pollInterval must not be negative"
	PollInterval metav1.Duration `json:"pollInterval"`
}

// BackupTargetStatus is what the last read of the target found.
type BackupTargetStatus struct {
	// The node whose manager keeps this target in step with the settings.
	// +optional
	OwnerID string `json:"ownerID"`
	// Whether the last poll could read the target.
	// +optional
	Available bool `json:"available"`
	// Unavailable, True with the reason while the target cannot be read.
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
	// When a poll last read the target.
	// +optional
	// +nullable
	LastSyncedAt metav1.Time `json:"lastSyncedAt"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhbt,categories=longhorn
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.backupTargetURL`,description="The backup target URL"
// +kubebuilder:printcolumn:name="Credential",type=string,JSONPath=`.spec.credentialSecret`,description="The backup target credential secret"
// +kubebuilder:printcolumn:name="LastBackupAt",type=string,JSONPath=`.spec.pollInterval`,description="The backup target poll interval"
// +kubebuilder:printcolumn:name="Available",type=boolean,JSONPath=`.status.available`,description="Whether the backup target is available"
// +kubebuilder:printcolumn:name="LastSyncedAt",type=string,JSONPath=`.status.lastSyncedAt`,description="When the backup target was last read"

// BackupTarget is a place backups are stored. The one named "default" is
// the target of the backup-target, backup-target-credential-secret and
// backupstore-poll-interval settings, kept in step with them both ways.
type BackupTarget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec BackupTargetSpec `json:"spec,omitempty"`
	// +optional
	Status BackupTargetStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BackupTargetList is a list of BackupTargets.
type BackupTargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupTarget `json:"items"`
}
