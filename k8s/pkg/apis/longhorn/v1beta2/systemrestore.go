package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SystemRestoreState is where a SystemRestore is on its way, Longhorn's
// states.
type SystemRestoreState string

// A SystemRestore's states, its condition and its reasons, as Longhorn's.
const (
	SystemRestoreStateCompleted    = SystemRestoreState("Completed")
	SystemRestoreStateDeleting     = SystemRestoreState("Deleting")
	SystemRestoreStateDownloading  = SystemRestoreState("Downloading")
	SystemRestoreStateError        = SystemRestoreState("Error")
	SystemRestoreStateInitializing = SystemRestoreState("Initializing")
	SystemRestoreStateInProgress   = SystemRestoreState("InProgress")
	SystemRestoreStateNone         = SystemRestoreState("")
	SystemRestoreStatePending      = SystemRestoreState("Pending")
	SystemRestoreStateRestoring    = SystemRestoreState("Restoring")
	SystemRestoreStateUnknown      = SystemRestoreState("Unknown")
	SystemRestoreStateUnpacking    = SystemRestoreState("Unpacking")

	SystemRestoreConditionTypeError = "Error"

	SystemRestoreConditionReasonRestore = "Restore"
	SystemRestoreConditionReasonUnpack  = "Unpack"
)

// SystemRestoreSpec names the system backup to restore, and who asked.
type SystemRestoreSpec struct {
	// The SystemBackup's name, as in the backup target.
	SystemBackup string `json:"systemBackup"`
	// Requester is who asked for the restore: every object it creates
	// needs their rights, checked before it creates any. The API records
	// its authenticated caller; with kubectl the maker records
	// themselves (the admission policy longhorn-system-restore-requester
	// refuses anyone else). A restore without one is refused.
	// +optional
	Requester *SystemRestoreRequester `json:"requester,omitempty"`
}

// SystemRestoreRequester is a user as the apiserver authenticates them
// (authentication.k8s.io UserInfo): the user a SubjectAccessReview asks
// about.
type SystemRestoreRequester struct {
	Username string `json:"username"`
	// +optional
	UID string `json:"uid,omitempty"`
	// +optional
	Groups []string `json:"groups,omitempty"`
	// +optional
	Extra map[string][]string `json:"extra,omitempty"`
}

// SystemRestoreStatus is where the restore is.
type SystemRestoreStatus struct {
	// The node whose manager runs this restore.
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	State SystemRestoreState `json:"state,omitempty"`
	// Where the archive was read from.
	// +optional
	SourceURL string `json:"sourceURL,omitempty"`
	// Error, True with the reason when the restore failed.
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=lhsr,categories=longhorn
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="The system restore state"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// SystemRestore brings back, into this cluster, the objects a system
// backup archived, and restores its volumes from their backups.
type SystemRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SystemRestoreSpec `json:"spec,omitempty"`
	// +optional
	Status SystemRestoreStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// SystemRestoreList is a list of SystemRestores.
type SystemRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SystemRestore `json:"items"`
}
