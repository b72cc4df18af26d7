package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// VolumeState is the attachment state of a volume.
// +kubebuilder:validation:Enum=creating;attached;detached;attaching;detaching;deleting
type VolumeState string

const (
	VolumeStateCreating  VolumeState = "creating"
	VolumeStateAttached  VolumeState = "attached"
	VolumeStateDetached  VolumeState = "detached"
	VolumeStateAttaching VolumeState = "attaching"
	VolumeStateDetaching VolumeState = "detaching"
	VolumeStateDeleting  VolumeState = "deleting"
)

// VolumeRobustness is how well a volume's replicas protect its data.
// +kubebuilder:validation:Enum=healthy;degraded;faulted;unknown
type VolumeRobustness string

const (
	VolumeRobustnessHealthy  VolumeRobustness = "healthy"
	VolumeRobustnessDegraded VolumeRobustness = "degraded"
	VolumeRobustnessFaulted  VolumeRobustness = "faulted"
	VolumeRobustnessUnknown  VolumeRobustness = "unknown"
)

// VolumeFrontend is how an attached volume is exposed on its node.
// +kubebuilder:validation:Enum=blockdev;iscsi;nvmf;""
type VolumeFrontend string

const (
	VolumeFrontendBlockDev VolumeFrontend = "blockdev"
	VolumeFrontendISCSI    VolumeFrontend = "iscsi"
	VolumeFrontendNvmf     VolumeFrontend = "nvmf"
	VolumeFrontendEmpty    VolumeFrontend = ""
)

// AccessMode is the access mode of a volume.
// +kubebuilder:validation:Enum=rwo;rwx
type AccessMode string

const (
	AccessModeReadWriteOnce AccessMode = "rwo"
	AccessModeReadWriteMany AccessMode = "rwx"
)

// FreezeFilesystemForSnapshot says whether the volume's snapshots freeze
// its mounted filesystem for their instant (Longhorn's): ignored follows
// the freeze-filesystem-for-snapshot setting.
// +kubebuilder:validation:Enum=ignored;enabled;disabled
type FreezeFilesystemForSnapshot string

const (
	FreezeFilesystemForSnapshotDefault  FreezeFilesystemForSnapshot = "ignored"
	FreezeFilesystemForSnapshotEnabled  FreezeFilesystemForSnapshot = "enabled"
	FreezeFilesystemForSnapshotDisabled FreezeFilesystemForSnapshot = "disabled"
)

// SoftAntiAffinity overrides, for one volume, a setting of replica
// anti-affinity (Longhorn's replicaSoftAntiAffinity,
// replicaZoneSoftAntiAffinity, replicaDiskSoftAntiAffinity): enabled lets
// its replicas share a node (zone, disk) when nothing else can take one,
// disabled never, ignored follows the setting.
// +kubebuilder:validation:Enum=ignored;enabled;disabled
type SoftAntiAffinity string

const (
	SoftAntiAffinityDefault  SoftAntiAffinity = "ignored"
	SoftAntiAffinityEnabled  SoftAntiAffinity = "enabled"
	SoftAntiAffinityDisabled SoftAntiAffinity = "disabled"
)

// DataLocality says whether a replica is kept on the node that uses the volume.
// +kubebuilder:validation:Enum=disabled;best-effort;strict-local
type DataLocality string

const (
	DataLocalityDisabled    DataLocality = "disabled"
	DataLocalityBestEffort  DataLocality = "best-effort"
	DataLocalityStrictLocal DataLocality = "strict-local"
)

// RecurringJobType is the task a recurring job performs.
// +kubebuilder:validation:Enum=snapshot;snapshot-force-create;snapshot-cleanup;snapshot-delete;backup;backup-force-create;backup-verify;filesystem-trim;system-backup
type RecurringJobType string

const (
	RecurringJobTypeSnapshot            RecurringJobType = "snapshot"
	RecurringJobTypeSnapshotForceCreate RecurringJobType = "snapshot-force-create"
	RecurringJobTypeSnapshotCleanup     RecurringJobType = "snapshot-cleanup"
	RecurringJobTypeSnapshotDelete      RecurringJobType = "snapshot-delete"
	RecurringJobTypeBackup              RecurringJobType = "backup"
	RecurringJobTypeBackupForceCreate   RecurringJobType = "backup-force-create"
	// RecurringJobTypeBackupVerify drills the newest Completed backup of
	// each volume: every block read back and checked (see backups.md).
	RecurringJobTypeBackupVerify RecurringJobType = "backup-verify"
	// RecurringJobTypeFilesystemTrim trims the filesystem a pod mounts
	// from each attached volume (the trimFilesystem action), then purges
	// the snapshots already removed, as Longhorn's does.
	RecurringJobTypeFilesystemTrim RecurringJobType = "filesystem-trim"
	// RecurringJobTypeSystemBackup (Longhorn v1.9) makes a SystemBackup
	// each run, with the volume-backup-policy parameter, and keeps the
	// newest retain of the job's.
	RecurringJobTypeSystemBackup RecurringJobType = "system-backup"
)

// RecurringJobTypes lists every task, in the order the API shows them (the
// enum marker above holds the same list for the CRD).
var RecurringJobTypes = []RecurringJobType{
	RecurringJobTypeSnapshot, RecurringJobTypeSnapshotForceCreate, RecurringJobTypeSnapshotCleanup,
	RecurringJobTypeSnapshotDelete, RecurringJobTypeBackup, RecurringJobTypeBackupForceCreate, RecurringJobTypeBackupVerify,
	RecurringJobTypeFilesystemTrim, RecurringJobTypeSystemBackup,
}

// VolumeRecurringJobSpec is one entry of the deprecated per-volume job list
// of Longhorn v1.1. It is kept so the upgrade migrator can turn each entry
// into a RecurringJob and a volume label; nothing else reads it.
type VolumeRecurringJobSpec struct {
	Name string `json:"name"`
	// +optional
	Groups []string `json:"groups,omitempty"`
	Task   string   `json:"task"`
	Cron   string   `json:"cron"`
	// +optional
	Retain int `json:"retain"`
	// +optional
	Concurrency int `json:"concurrency"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// VolumeSpec is the desired state of a volume.
// +kubebuilder:validation:XValidation:rule="(has(self.backingImage) ? self.backingImage : \"\") == (has(oldSelf.backingImage) ? oldSelf.backingImage : \"\")",message="backingImage is immutable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.size) || (has(self.size) && int(self.size) >= int(oldSelf.size))",message="size: a volume never shrinks; it may only grow"
type VolumeSpec struct {
	// Size in bytes, as a decimal string. It may grow (the engine grows
	// the replicas while the volume runs, or at its next start), never
	// shrink.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[0-9]+$`
	// +kubebuilder:validation:MaxLength=19
	// +optional
	Size int64 `json:"size,string"`
	// +optional
	Frontend VolumeFrontend `json:"frontend"`
	// +optional
	FromBackup string `json:"fromBackup"`
	// The BackupTarget the volume's backups go to; empty is "default".
	// +optional
	BackupTargetName string `json:"backupTargetName"`
	// +optional
	DataSource string `json:"dataSource"`
	// +optional
	DataLocality DataLocality `json:"dataLocality,omitempty"`
	// Whether the volume's snapshots freeze its mounted filesystem;
	// empty is ignored (the setting decides).
	// +optional
	FreezeFilesystemForSnapshot FreezeFilesystemForSnapshot `json:"freezeFilesystemForSnapshot,omitempty"`
	// Minutes before a failed replica is cleaned up.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StaleReplicaTimeout int `json:"staleReplicaTimeout"`
	// The node the volume is attached to; empty when detached.
	// +optional
	NodeID string `json:"nodeID"`
	// +optional
	MigrationNodeID string `json:"migrationNodeID"`
	// +optional
	Image string `json:"image"`
	// Name of the backing image the volume starts from; fixed at creation.
	// +optional
	BackingImage string `json:"backingImage"`
	// +optional
	Standby bool `json:"Standby"`
	// +optional
	DiskSelector []string `json:"diskSelector"`
	// Replica anti-affinity by node, zone and disk: ignored (or empty)
	// follows the settings replica-soft-anti-affinity,
	// replica-zone-soft-anti-affinity and replica-disk-soft-anti-affinity.
	// +optional
	ReplicaSoftAntiAffinity SoftAntiAffinity `json:"replicaSoftAntiAffinity,omitempty"`
	// +optional
	ReplicaZoneSoftAntiAffinity SoftAntiAffinity `json:"replicaZoneSoftAntiAffinity,omitempty"`
	// +optional
	ReplicaDiskSoftAntiAffinity SoftAntiAffinity `json:"replicaDiskSoftAntiAffinity,omitempty"`
	// +optional
	NodeSelector []string `json:"nodeSelector"`
	// +optional
	DisableFrontend bool `json:"disableFrontend"`
	// +optional
	RevisionCounterDisabled bool `json:"revisionCounterDisabled"`
	// +optional
	LastAttachedBy string `json:"lastAttachedBy"`
	// +kubebuilder:default=rwo
	// +optional
	AccessMode AccessMode `json:"accessMode,omitempty"`
	// +optional
	Migratable bool `json:"migratable"`
	// +optional
	Encrypted bool `json:"encrypted"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	// +optional
	NumberOfReplicas int `json:"numberOfReplicas"`
	// +optional
	ReplicaAutoBalance string `json:"replicaAutoBalance,omitempty"`
	// Deprecated: replaced by RecurringJob resources selected by volume
	// labels. Kept only for the upgrade migration, which empties it.
	// +optional
	RecurringJobs []VolumeRecurringJobSpec `json:"recurringJobs,omitempty"`
	// +optional
	DataEngine DataEngineType `json:"dataEngine,omitempty"`
}

// KubernetesStatus is what the manager knows of the PV and PVC of a volume.
type KubernetesStatus struct {
	// +optional
	PVName string `json:"pvName"`
	// +optional
	PVStatus string `json:"pvStatus"`
	// +optional
	Namespace string `json:"namespace"`
	// +optional
	PVCName string `json:"pvcName"`
	// +optional
	LastPVCRefAt string `json:"lastPVCRefAt"`
	// +optional
	LastPodRefAt string `json:"lastPodRefAt"`
}

// VolumeCloneStatus is the progress of cloning another volume's data.
type VolumeCloneStatus struct {
	// +optional
	SourceVolume string `json:"sourceVolume"`
	// +optional
	Snapshot string `json:"snapshot"`
	// +optional
	State string `json:"state"`
}

// VolumeStatus is the observed state of a volume.
type VolumeStatus struct {
	// The node whose manager reconciles the volume.
	// +optional
	OwnerID string `json:"ownerID"`
	// +optional
	State VolumeState `json:"state,omitempty"`
	// +optional
	Robustness VolumeRobustness `json:"robustness,omitempty"`
	// +optional
	CurrentNodeID string `json:"currentNodeID"`
	// +optional
	CurrentImage string `json:"currentImage"`
	// Term is the term of the volume's latest engine over remote
	// replicas: each such start takes the next, recorded here before the
	// engine starts, and the engine owns its replicas with it, so a
	// replica that a newer engine took refuses every older one
	// (docs/design-data-plane.md, "Two writers never happen: the term").
	// 0 before the first.
	// +optional
	Term int64 `json:"term,omitempty"`
	// +optional
	KubernetesStatus KubernetesStatus `json:"kubernetesStatus"`
	// +optional
	FrontendDisabled bool `json:"frontendDisabled"`
	// +optional
	RestoreRequired bool `json:"restoreRequired"`
	// +optional
	RestoreInitiated bool `json:"restoreInitiated"`
	// +optional
	CloneStatus VolumeCloneStatus `json:"cloneStatus"`
	// +optional
	RemountRequestedAt string `json:"remountRequestedAt"`
	// +optional
	ExpansionRequired bool `json:"expansionRequired"`
	// +optional
	IsStandby bool `json:"isStandby"`
	// Bytes the volume's data takes on disk.
	// +optional
	ActualSize int64 `json:"actualSize"`
	// +optional
	LastDegradedAt string `json:"lastDegradedAt"`
	// +optional
	ShareEndpoint string `json:"shareEndpoint"`
	// +optional
	ShareState string `json:"shareState"`
	// +optional
	LastBackup string `json:"lastBackup"`
	// +optional
	LastBackupAt string `json:"lastBackupAt"`
	// LastBackupVerification is the last drill of the volume's newest
	// backup (backup-verify): the backup, when and what it found.
	// Written by the backup verify controller.
	// +optional
	LastBackupVerification *BackupVerification `json:"lastBackupVerification,omitempty"`
	// +optional
	PendingNodeID string `json:"pendingNodeID"`
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhv,categories=longhorn
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="The state of the volume"
// +kubebuilder:printcolumn:name="Robustness",type=string,JSONPath=`.status.robustness`,description="The robustness of the volume"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=='Scheduled')].status`,description="The scheduled condition of the volume"
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.size`,description="The size of the volume in bytes"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.currentNodeID`,description="The node the volume is attached to"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Volume is a replicated block device managed by Longhorn.
type Volume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec VolumeSpec `json:"spec,omitempty"`
	// +optional
	Status VolumeStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// VolumeList is a list of Volumes.
type VolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Volume `json:"items"`
}
