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
	// VerifyRequestedAt asks for a drill of the backup (the backup volume's
	// backupVerify action, a backup-verify recurring job): one runs when it
	// is later than status.verification.requestedAt.
	// +optional
	// +nullable
	VerifyRequestedAt metav1.Time `json:"verifyRequestedAt"`
	// VerifyFull asks that the drill asked for be a full one: past the
	// blocks, the backup is restored into a scratch volume and its
	// filesystem checked read-only (the backupVerify action's full, a
	// backup-verify job's full-drill parameter).
	// +optional
	VerifyFull bool `json:"verifyFull,omitempty"`
}

// Results of a backup drill.
const (
	// BackupVerificationPassed: every block read back whole, the config,
	// the volume record and the digest valid.
	BackupVerificationPassed = "Passed"
	// BackupVerificationFailed: the backup is damaged (a bad block, an
	// invalid config or record, a digest that does not match).
	BackupVerificationFailed = "Failed"
	// BackupVerificationError: the drill could not be made (the target
	// could not be read); nothing is known of the backup.
	BackupVerificationError = "Error"
)

// BackupVerification is what the last drill of a backup found.
type BackupVerification struct {
	// Backup is the backup drilled (on a Volume's record; empty on the
	// Backup's own).
	// +optional
	Backup string `json:"backup,omitempty"`
	// RequestedAt is the spec.verifyRequestedAt the drill answered.
	// +optional
	// +nullable
	RequestedAt metav1.Time `json:"requestedAt"`
	// RequestedFull is the spec.verifyFull the drill answered: it was
	// asked to be a full one. A drill answers only the request it ran
	// for: one of the blocks alone never answers a full one.
	// +optional
	RequestedFull bool `json:"requestedFull,omitempty"`
	// VerifiedAt is when the drill ended.
	// +optional
	// +nullable
	VerifiedAt metav1.Time `json:"verifiedAt"`
	// +kubebuilder:validation:Enum=Passed;Failed;Error;""
	// +optional
	Result string `json:"result"`
	// Message says what was wrong, or why the drill could not be made.
	// +optional
	Message string `json:"message,omitempty"`
	// BadBlocks is how many blocks were bad; FirstBadBlockOffset and
	// FirstBadBlockReason the one of lowest offset (missing, truncated,
	// corrupt, checksumMismatch or unreadable).
	// +optional
	BadBlocks int `json:"badBlocks,omitempty"`
	// +optional
	FirstBadBlockOffset *int64 `json:"firstBadBlockOffset,omitempty"`
	// +optional
	FirstBadBlockReason string `json:"firstBadBlockReason,omitempty"`
	// Digest is what the drill found of the snapshot digest: matched,
	// absent (a backup made before digests) or mismatch.
	// +optional
	Digest string `json:"digest,omitempty"`
	// BlocksRead and DurationSeconds are the drill's cost: blocks read
	// (blocks read before in the same run are not read again) and its
	// time.
	// +optional
	BlocksRead int `json:"blocksRead,omitempty"`
	// +optional
	DurationSeconds string `json:"durationSeconds,omitempty"`
	// Full is what a full drill found past the blocks; nil for a drill
	// of the blocks alone.
	// +optional
	Full *BackupFullDrill `json:"full,omitempty"`
}

// Results of a full drill's filesystem check.
const (
	FilesystemCheckPassed = "Passed"
	// FilesystemCheckFailed: the filesystem is corrupt, or none is found
	// where an earlier drill of the volume's backups found one (lost).
	FilesystemCheckFailed  = "Failed"
	FilesystemCheckSkipped = "Skipped" // no filesystem the drill knows, and none ever found: a raw block volume
	FilesystemCheckError   = "Error"   // the check could not be run
)

// BackupFullDrill is what a full drill found once the blocks passed: the
// backup restored into a scratch volume (its digest checked end to end
// by the restore), and the filesystem it holds checked read-only.
type BackupFullDrill struct {
	// ScratchVolume is the volume restored into; deleted after the drill.
	// +optional
	ScratchVolume string `json:"scratchVolume,omitempty"`
	// Restored says the restore completed and its digest matched.
	// +optional
	Restored bool `json:"restored"`
	// RestoreSeconds is how long the restore took: what a recovery from
	// this backup would take on this node.
	// +optional
	RestoreSeconds string `json:"restoreSeconds,omitempty"`
	// Filesystem is what the restored data's superblock says it holds:
	// ext4 (ext2, ext3 and ext4), xfs, or none.
	// +optional
	Filesystem string `json:"filesystem,omitempty"`
	// FilesystemCheck is the result of the filesystem's own read-only
	// check (e2fsck -n -f, xfs_repair -n): Passed, Failed (corrupt; or
	// no filesystem found where an earlier drill of the volume's backups
	// found one), Skipped (no filesystem, and none ever found: a raw
	// block volume) or Error (the check could not be run).
	// +optional
	FilesystemCheck string `json:"filesystemCheck,omitempty"`
	// FilesystemCheckOutput is the check's command, exit status and the
	// end of its output.
	// +optional
	FilesystemCheckOutput string `json:"filesystemCheckOutput,omitempty"`
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
	// The BackupTarget the backup is in; empty (an object made before
	// there were several targets) is "default".
	// +optional
	BackupTargetName string `json:"backupTargetName"`
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
	// Verification is what the last drill of the backup found (written by
	// the backup verify controller; the target controller keeps it).
	// +optional
	Verification *BackupVerification `json:"verification,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhb,categories=longhorn
// +kubebuilder:printcolumn:name="BackupTarget",type=string,JSONPath=`.status.backupTargetName`,description="The backup target name"
// +kubebuilder:printcolumn:name="SnapshotName",type=string,JSONPath=`.status.snapshotName`,description="The snapshot the backup was taken from"
// +kubebuilder:printcolumn:name="SnapshotSize",type=string,JSONPath=`.status.size`,description="The size of the backed-up snapshot"
// +kubebuilder:printcolumn:name="SnapshotCreatedAt",type=string,JSONPath=`.status.snapshotCreatedAt`,description="When the snapshot was taken"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="The state of the backup"
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.verification.result`,description="The result of the last drill (backup-verify)"
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
