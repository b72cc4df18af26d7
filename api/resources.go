package api

import (
	"cmp"
	"net"
	"path/filepath"
	"sort"

	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/manager"
	"github.com/cadence-storage/longhorn-manager/types"
)

// retainAge shows a job's retainAge as Longhorn does, "0s" when unset.
func retainAge(d *metav1.Duration) string {
	if d == nil {
		return "0s"
	}
	return d.Duration.String()
}

// RecurringJob is the API view of a RecurringJob.
type RecurringJob struct {
	Resource
	Name                    string                     `json:"name"`
	Groups                  []string                   `json:"groups"`
	Task                    longhorn.RecurringJobType  `json:"task"`
	Cron                    string                     `json:"cron"`
	Retain                  int                        `json:"retain"`
	RetentionPolicy         string                     `json:"retentionPolicy"`
	RetainAge               string                     `json:"retainAge"`
	Concurrency             int                        `json:"concurrency"`
	Labels                  map[string]string          `json:"labels"`
	Parameters              map[string]string          `json:"parameters"`
	Conditions              []longhorn.Condition       `json:"conditions"`
	Suspend                 bool                       `json:"suspend"`
	TimeZone                string                     `json:"timeZone"`
	StartingDeadlineSeconds *int64                     `json:"startingDeadlineSeconds"`
	SkipImmediately         bool                       `json:"skipImmediately"`
	BackupTargetName        string                     `json:"backupTargetName"`
	LastScheduleTime        *metav1.Time               `json:"lastScheduleTime"`
	LastSkipped             *metav1.Time               `json:"lastSkipped"`
	NextScheduleTime        *metav1.Time               `json:"nextScheduleTime"`
	LastSuccessfulTime      *metav1.Time               `json:"lastSuccessfulTime"`
	Active                  []longhorn.RecurringJobRun `json:"active"`
	ExecutionCount          int64                      `json:"executionCount"`
}

// RecurringJobInput is the body of create and update.
type RecurringJobInput struct {
	Name                    string                    `json:"name"`
	Groups                  []string                  `json:"groups"`
	Task                    longhorn.RecurringJobType `json:"task"`
	Cron                    string                    `json:"cron"`
	Retain                  *int                      `json:"retain"`
	RetentionPolicy         *string                   `json:"retentionPolicy"`
	RetainAge               *string                   `json:"retainAge"`
	Concurrency             *int                      `json:"concurrency"`
	Labels                  map[string]string         `json:"labels"`
	Parameters              map[string]string         `json:"parameters"`
	Suspend                 *bool                     `json:"suspend"`
	TimeZone                *string                   `json:"timeZone"`
	StartingDeadlineSeconds *int64                    `json:"startingDeadlineSeconds"`
	SkipImmediately         *bool                     `json:"skipImmediately"`
	// BackupTargetName is the BackupTarget a backup job's backups go to
	// (not Longhorn's); empty: each volume's own.
	BackupTargetName *string `json:"backupTargetName"`
}

// Volume is the API view of a Volume, in the shape of Longhorn's: its UI
// dereferences most of these fields, so those the project has no concept
// of carry the value Longhorn shows for a volume without the feature.
type Volume struct {
	Resource
	Name                 string                               `json:"name"`
	Size                 string                               `json:"size"`
	NumberOfReplicas     int                                  `json:"numberOfReplicas"`
	Frontend             longhorn.VolumeFrontend              `json:"frontend"`
	BackingImage         string                               `json:"backingImage"`
	FromBackup           string                               `json:"fromBackup"`
	DataSource           string                               `json:"dataSource"`
	State                longhorn.VolumeState                 `json:"state"`
	Robustness           longhorn.VolumeRobustness            `json:"robustness"`
	CurrentNodeID        string                               `json:"currentNodeID"`
	NodeID               string                               `json:"nodeID"`
	AttachedBy           string                               `json:"attachedBy"`
	LastAttachedBy       string                               `json:"lastAttachedBy"`
	FrontendDisabled     bool                                 `json:"frontendDisabled"`
	DisableFrontend      bool                                 `json:"disableFrontend"`
	Endpoint             string                               `json:"endpoint"`
	RecurringJobSelector []datastore.RecurringJobSelectorItem `json:"recurringJobSelector"`
	// Conditions are keyed by type, as Longhorn's API and UI have them.
	Conditions map[string]longhorn.Condition `json:"conditions"`
	// Replicas are the volume's replicas and where they are: the volume
	// attaches only to the node that holds them.
	Replicas []VolumeReplica `json:"replicas"`
	// Controllers is the volume's engine, when it has one.
	Controllers []VolumeController `json:"controllers"`
	longhornVolumeFields
}

// longhornVolumeFields are the fields of Longhorn's volume resource that
// the project fills from what it has, or answers with Longhorn's value for
// a volume that does not use the feature.
type longhornVolumeFields struct {
	Created                 string                  `json:"created"`
	Image                   string                  `json:"image"`
	CurrentImage            string                  `json:"currentImage"`
	DataEngine              longhorn.DataEngineType `json:"dataEngine"`
	Ready                   bool                    `json:"ready"`
	NotReadyMessage         string                  `json:"notReadyMessage"`
	AccessMode              longhorn.AccessMode     `json:"accessMode"`
	DataLocality            longhorn.DataLocality   `json:"dataLocality"`
	StaleReplicaTimeout     int                     `json:"staleReplicaTimeout"`
	Standby                 bool                    `json:"standby"`
	RestoreRequired         bool                    `json:"restoreRequired"`
	RestoreInitiated        bool                    `json:"restoreInitiated"`
	RevisionCounterDisabled bool                    `json:"revisionCounterDisabled"`
	Migratable              bool                    `json:"migratable"`
	Encrypted               bool                    `json:"encrypted"`
	LastBackup              string                  `json:"lastBackup"`
	LastBackupAt            string                  `json:"lastBackupAt"`
	// LastBackupVerification is the last drill of the volume's newest
	// backup (backup-verify).
	LastBackupVerification      *longhorn.BackupVerification `json:"lastBackupVerification,omitempty"`
	ShareEndpoint               string                       `json:"shareEndpoint"`
	ShareState                  string                       `json:"shareState"`
	SnapshotDataIntegrity       string                       `json:"snapshotDataIntegrity"`
	UnmapMarkSnapChainRemoved   string                       `json:"unmapMarkSnapChainRemoved"`
	ReplicaAutoBalance          string                       `json:"replicaAutoBalance"`
	ReplicaSoftAntiAffinity     string                       `json:"replicaSoftAntiAffinity"`
	ReplicaZoneSoftAntiAffinity string                       `json:"replicaZoneSoftAntiAffinity"`
	ReplicaDiskSoftAntiAffinity string                       `json:"replicaDiskSoftAntiAffinity"`
	FreezeFilesystemForSnapshot string                       `json:"freezeFilesystemForSnapshot"`
	BackupCompressionMethod     string                       `json:"backupCompressionMethod"`
	BackupBlockSize             string                       `json:"backupBlockSize"`
	BackupTargetName            string                       `json:"backupTargetName"`
	SnapshotMaxCount            int                          `json:"snapshotMaxCount"`
	SnapshotMaxSize             string                       `json:"snapshotMaxSize"`
	DiskSelector                []string                     `json:"diskSelector"`
	NodeSelector                []string                     `json:"nodeSelector"`
	KubernetesStatus            VolumeKubernetesStatus       `json:"kubernetesStatus"`
	CloneStatus                 longhorn.VolumeCloneStatus   `json:"cloneStatus"`
	BackupStatus                []VolumeBackupStatus         `json:"backupStatus"`
	RestoreStatus               []struct{}                   `json:"restoreStatus"`
	PurgeStatus                 []struct{}                   `json:"purgeStatus"`
	RebuildStatus               []VolumeRebuildStatus        `json:"rebuildStatus"`
	VolumeAttachment            VolumeAttachment             `json:"volumeAttachment"`
}

// VolumeKubernetesStatus is Longhorn's view of a volume's PV, PVC and
// workloads: the PV and claim as controller/pvc records them; no
// workloads (the manager does not follow pods).
type VolumeKubernetesStatus struct {
	PVName          string `json:"pvName"`
	PVStatus        string `json:"pvStatus"`
	Namespace       string `json:"namespace"`
	PVCName         string `json:"pvcName"`
	LastPVCRefAt    string `json:"lastPVCRefAt"`
	LastPodRefAt    string `json:"lastPodRefAt"`
	WorkloadsStatus []any  `json:"workloadsStatus"`
}

func volumeKubernetesStatus(ks longhorn.KubernetesStatus) VolumeKubernetesStatus {
	return VolumeKubernetesStatus{PVName: ks.PVName, PVStatus: ks.PVStatus, Namespace: ks.Namespace, PVCName: ks.PVCName,
		LastPVCRefAt: ks.LastPVCRefAt, LastPodRefAt: ks.LastPodRefAt, WorkloadsStatus: []any{}}
}

// VolumeBackupStatus is one backup the volume's engine runs or ran.
type VolumeBackupStatus struct {
	Resource
	Name      string `json:"id"`
	Snapshot  string `json:"snapshot"`
	Progress  int    `json:"progress"`
	BackupURL string `json:"backupURL"`
	Error     string `json:"error"`
	State     string `json:"state"`
	Replica   string `json:"replica"`
	Size      string `json:"size"`
}

// VolumeReplica is one replica of a volume, as Longhorn's API shows it.
type VolumeReplica struct {
	volumeInstance
	DiskID   string `json:"diskID"`
	DiskPath string `json:"diskPath"`
	DataPath string `json:"dataPath"`
	// Mode is the replica's mode in the engine: RW, WO or ERR; empty
	// while no engine has it.
	Mode       string `json:"mode"`
	FailedAt   string `json:"failedAt"`
	DataEngine string `json:"dataEngine"`
	// HealthyAt is when an engine first opened the replica's data; empty
	// while it has none yet.
	HealthyAt string `json:"healthyAt"`
}

// volumeInstance is what replicas and controllers share, as Longhorn's
// Instance.
type volumeInstance struct {
	Name                string `json:"name"`
	HostID              string `json:"hostId"`
	Address             string `json:"address"`
	Running             bool   `json:"running"`
	Image               string `json:"image"`
	CurrentImage        string `json:"currentImage"`
	InstanceManagerName string `json:"instanceManagerName"`
}

// VolumeController is the volume's engine, as Longhorn's Controller.
type VolumeController struct {
	volumeInstance
	Size                             string `json:"size"`
	ActualSize                       string `json:"actualSize"`
	Endpoint                         string `json:"endpoint"`
	LastRestoredBackup               string `json:"lastRestoredBackup"`
	RequestedBackupRestore           string `json:"requestedBackupRestore"`
	IsExpanding                      bool   `json:"isExpanding"`
	LastExpansionError               string `json:"lastExpansionError"`
	LastExpansionFailedAt            string `json:"lastExpansionFailedAt"`
	UnmapMarkSnapChainRemovedEnabled bool   `json:"unmapMarkSnapChainRemovedEnabled"`
}

// VolumeInput is the body of volume create.
type VolumeInput struct {
	Name                 string                               `json:"name"`
	Size                 string                               `json:"size"`
	NumberOfReplicas     int                                  `json:"numberOfReplicas"`
	Frontend             longhorn.VolumeFrontend              `json:"frontend"`
	BackingImage         string                               `json:"backingImage"`
	FromBackup           string                               `json:"fromBackup"`
	RecurringJobSelector []datastore.RecurringJobSelectorItem `json:"recurringJobSelector"`
	// BackupTargetName is the BackupTarget the volume's backups go to;
	// empty is default. Longhorn's.
	BackupTargetName string `json:"backupTargetName"`
	// StaleReplicaTimeout is in minutes, Longhorn's.
	StaleReplicaTimeout int `json:"staleReplicaTimeout"`
	// FreezeFilesystemForSnapshot is ignored (also empty), enabled or
	// disabled.
	FreezeFilesystemForSnapshot string `json:"freezeFilesystemForSnapshot"`
	// DataEngine is Longhorn's engine choice: only v1 (or empty) exists
	// here. Longhorn's python client always sends it.
	DataEngine string `json:"dataEngine"`
	// AccessMode is rwo (or empty): the project shares no volume.
	AccessMode string `json:"accessMode"`
	// DataSource is Longhorn's clone source (vol://<volume> or
	// snap://<volume>/<snapshot>): the volume is filled with the source's
	// bytes before it attaches.
	DataSource string `json:"dataSource"`
	// SelectedNode is the node whose disks take the replicas (the CSI
	// driver's choice for a WaitForFirstConsumer claim); any node when
	// empty. A clone is made where its source is, whatever it says.
	SelectedNode string `json:"selectedNode"`
	// ReplicaSoftAntiAffinity, ReplicaZoneSoftAntiAffinity and
	// ReplicaDiskSoftAntiAffinity override the settings of the same
	// names for the volume: ignored (or empty), enabled or disabled.
	ReplicaSoftAntiAffinity     string `json:"replicaSoftAntiAffinity"`
	ReplicaZoneSoftAntiAffinity string `json:"replicaZoneSoftAntiAffinity"`
	ReplicaDiskSoftAntiAffinity string `json:"replicaDiskSoftAntiAffinity"`
	// NodeSelector and DiskSelector are the tags a node and a disk need
	// to take one of the volume's replicas.
	NodeSelector []string `json:"nodeSelector"`
	DiskSelector []string `json:"diskSelector"`
	// DataLocality is disabled (or empty) or strict-local (one replica,
	// the volume attached only on its node).
	DataLocality string `json:"dataLocality"`
}

// VolumeRecurringJobInput is the body of recurringJobAdd and recurringJobDelete.
type VolumeRecurringJobInput struct {
	Name    string `json:"name"`
	IsGroup bool   `json:"isGroup"`
}

// VolumeRecurringJob is one job or group a volume selects.
type VolumeRecurringJob struct {
	Resource
	Name    string `json:"name"`
	IsGroup bool   `json:"isGroup"`
}

// Setting is the API view of a Setting with its definition.
type Setting struct {
	Resource
	Name       string            `json:"name"`
	Value      string            `json:"value"`
	Applied    bool              `json:"applied"`
	Definition SettingDefinition `json:"definition"`
}

// SettingDefinition describes a setting to clients.
type SettingDefinition struct {
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
	Category    string `json:"category"`
	Type        string `json:"type"`
	Default     string `json:"default"`
	Min         *int   `json:"min,omitempty"`
	Max         *int   `json:"max,omitempty"`
	// ReadOnly settings cannot be changed (Longhorn's readOnly).
	ReadOnly bool `json:"readOnly"`
}

// SettingInput is the body of a setting update.
type SettingInput struct {
	Value string `json:"value"`
}

// Node is the API view of a Node.
type Node struct {
	Resource
	Name            string                        `json:"name"`
	AllowScheduling bool                          `json:"allowScheduling"`
	Conditions      map[string]longhorn.Condition `json:"conditions"`
	Disks           map[string]Disk               `json:"disks"`
	// What Longhorn's node has and the project does not: empty.
	Address                   string   `json:"address"`
	EvictionRequested         bool     `json:"evictionRequested"`
	Tags                      []string `json:"tags"`
	Region                    string   `json:"region"`
	Zone                      string   `json:"zone"`
	InstanceManagerCPURequest int      `json:"instanceManagerCPURequest"`
	AutoEvicting              bool     `json:"autoEvicting"`
}

// Disk is one disk of a Node, with its spec and observed status.
type Disk struct {
	Path             string                        `json:"path"`
	DiskUUID         string                        `json:"diskUUID"`
	AllowScheduling  bool                          `json:"allowScheduling"`
	StorageReserved  int64                         `json:"storageReserved"`
	StorageAvailable int64                         `json:"storageAvailable"`
	StorageMaximum   int64                         `json:"storageMaximum"`
	StorageScheduled int64                         `json:"storageScheduled"`
	Conditions       map[string]longhorn.Condition `json:"conditions"`
	// What Longhorn's disk has and the project does not: a filesystem
	// disk without tags, eviction or a scheduling breakdown.
	DiskType              string           `json:"diskType"`
	DiskDriver            string           `json:"diskDriver"`
	Tags                  []string         `json:"tags"`
	EvictionRequested     bool             `json:"evictionRequested"`
	ScheduledReplica      map[string]int64 `json:"scheduledReplica"`
	ScheduledBackingImage map[string]int64 `json:"scheduledBackingImage"`
}

// conditionMap keys conditions by type, as Longhorn's API renders them
// for volumes, nodes and disks ({"Ready": {"type": "Ready", ...}}).
func conditionMap(c []longhorn.Condition) map[string]longhorn.Condition {
	m := make(map[string]longhorn.Condition, len(c))
	for _, cond := range c {
		m[cond.Type] = cond
	}
	return m
}

// conditions renders a nil list as [], as clients expect a list.
func conditions(c []longhorn.Condition) []longhorn.Condition {
	if c == nil {
		return []longhorn.Condition{}
	}
	return c
}

func resource(base, typ, collection, id string) Resource {
	return Resource{
		ID:      id,
		Type:    typ,
		Links:   map[string]string{"self": base + "/v1/" + collection + "/" + id},
		Actions: map[string]string{},
	}
}

func toRecurringJob(base string, j *longhorn.RecurringJob) RecurringJob {
	groups := j.Spec.Groups
	if groups == nil {
		groups = []string{}
	}
	labels := j.Spec.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	active := j.Status.Active
	if active == nil {
		active = []longhorn.RecurringJobRun{}
	}
	return RecurringJob{
		Resource: resource(base, "recurringJob", "recurringjobs", j.Name),
		Name:     j.Name, Groups: groups, Task: j.Spec.Task, Cron: j.Spec.Cron,
		Retain: j.Spec.Retain, RetentionPolicy: string(cmp.Or(j.Spec.RetentionPolicy, longhorn.RecurringJobRetentionPolicyCountBased)),
		RetainAge: retainAge(j.Spec.RetainAge), Concurrency: j.Spec.Concurrency, Labels: labels, Parameters: nonNilMap(j.Spec.Parameters), Conditions: conditions(j.Status.Conditions),
		Suspend: j.Spec.Suspend, TimeZone: j.Spec.TimeZone, StartingDeadlineSeconds: j.Spec.StartingDeadlineSeconds,
		SkipImmediately: j.Spec.SkipImmediately != nil && *j.Spec.SkipImmediately, BackupTargetName: j.Spec.BackupTargetName,
		LastScheduleTime: j.Status.LastScheduleTime, LastSkipped: j.Status.LastSkipped,
		NextScheduleTime: j.Status.NextScheduleTime, LastSuccessfulTime: j.Status.LastSuccessfulTime,
		Active: active, ExecutionCount: j.Status.ExecutionCount,
	}
}

// volumeActions are offered in every volume state; snapshotActions and
// attachedActions while the volume is attached.
var (
	volumeActions = []string{"recurringJobAdd", "recurringJobDelete", "recurringJobList", "attach", "detach", "updateBackupTargetName", "updateFreezeFilesystemForSnapshot", "expand",
		"updateReplicaSoftAntiAffinity", "updateReplicaZoneSoftAntiAffinity", "updateReplicaDiskSoftAntiAffinity"}
	snapshotActions = []string{"snapshotCreate", "snapshotList", "snapshotGet", "snapshotDelete", "snapshotPurge", "snapshotRevert", "snapshotBackup"}
	attachedActions = []string{"trimFilesystem"}
)

func (s *Server) toVolume(base string, v *longhorn.Volume) Volume {
	r := resource(base, "volume", "volumes", v.Name)
	actions := append(append(append([]string{}, volumeActions...), snapshotCRActions...), refusedButOffered...)
	if v.Status.State == longhorn.VolumeStateAttached {
		actions = append(append(actions, snapshotActions...), attachedActions...)
	}
	for _, a := range actions {
		r.Actions[a] = r.Links["self"] + "?action=" + a
	}
	selector := datastore.RecurringJobSelector(v.Labels)
	if selector == nil {
		selector = []datastore.RecurringJobSelectorItem{}
	}
	engine, _ := s.ds.GetEngineRO(datastore.EngineName(v.Name))
	var modes map[string]longhorn.ReplicaMode
	if engine != nil {
		modes = engine.Status.ReplicaModeMap
	}
	state := v.Status.State
	if v.DeletionTimestamp != nil {
		// Being deleted, as Longhorn's API says whatever the state was.
		state = longhorn.VolumeStateDeleting
	}
	out := Volume{
		Resource: r, Name: v.Name, Size: strconv.FormatInt(v.Spec.Size, 10), NumberOfReplicas: v.Spec.NumberOfReplicas,
		Frontend: v.Spec.Frontend, BackingImage: v.Spec.BackingImage, FromBackup: v.Spec.FromBackup, DataSource: v.Spec.DataSource, State: state, Robustness: v.Status.Robustness,
		CurrentNodeID: v.Status.CurrentNodeID, NodeID: v.Spec.NodeID, AttachedBy: attachedBy(v), LastAttachedBy: v.Spec.LastAttachedBy,
		RecurringJobSelector: selector, Conditions: conditionMap(v.Status.Conditions),
		FrontendDisabled: v.Status.FrontendDisabled, DisableFrontend: v.Spec.DisableFrontend, Endpoint: s.volumeEndpoint(v.Name),
		Replicas: s.volumeReplicas(v.Name, modes), Controllers: volumeControllers(engine),
		longhornVolumeFields: longhornVolumeFields{
			Created: v.CreationTimestamp.String(), Image: cmp.Or(v.Spec.Image, v.Status.CurrentImage), CurrentImage: v.Status.CurrentImage,
			DataEngine: longhorn.DataEngineTypeV1, AccessMode: longhorn.AccessModeReadWriteOnce, DataLocality: cmp.Or(v.Spec.DataLocality, longhorn.DataLocalityDisabled),
			StaleReplicaTimeout: v.Spec.StaleReplicaTimeout, Standby: v.Spec.Standby,
			RestoreRequired: v.Status.RestoreRequired, RestoreInitiated: v.Status.RestoreInitiated,
			RevisionCounterDisabled: v.Spec.RevisionCounterDisabled, Migratable: v.Spec.Migratable, Encrypted: v.Spec.Encrypted,
			SnapshotDataIntegrity: "ignored", UnmapMarkSnapChainRemoved: "ignored", ReplicaAutoBalance: "ignored",
			ReplicaSoftAntiAffinity:     manager.SoftAntiAffinityOf(v.Spec.ReplicaSoftAntiAffinity),
			ReplicaZoneSoftAntiAffinity: manager.SoftAntiAffinityOf(v.Spec.ReplicaZoneSoftAntiAffinity),
			ReplicaDiskSoftAntiAffinity: manager.SoftAntiAffinityOf(v.Spec.ReplicaDiskSoftAntiAffinity),
			FreezeFilesystemForSnapshot: string(manager.FreezeOf(v)), SnapshotMaxSize: "0",
			BackupBlockSize: strconv.Itoa(backupstore.BlockSize), BackupTargetName: datastore.TargetName(v.Spec.BackupTargetName),
			DiskSelector: nonNil(v.Spec.DiskSelector), NodeSelector: nonNil(v.Spec.NodeSelector),
			KubernetesStatus:       volumeKubernetesStatus(v.Status.KubernetesStatus),
			CloneStatus:            v.Status.CloneStatus,
			LastBackupVerification: v.Status.LastBackupVerification,
			BackupStatus:           volumeBackupStatus(engine), RestoreStatus: []struct{}{}, PurgeStatus: []struct{}{}, RebuildStatus: volumeRebuildStatus(engine),
			VolumeAttachment: VolumeAttachment{Resource: resource(base, "volumeAttachment", "volumeattachments", v.Name), Volume: v.Name, Attachments: volumeAttachments(v)},
		},
	}
	if out.DataEngine == "" {
		out.DataEngine = longhorn.DataEngineTypeV1
	}
	out.Ready, out.NotReadyMessage = volumeReady(v)
	return out
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// volumeReady is Longhorn's "ready": the volume can be used, which it
// cannot while it is being created, restored or cloned, is faulted or
// cannot be scheduled.
func volumeReady(v *longhorn.Volume) (bool, string) {
	switch {
	case v.Status.State == longhorn.VolumeStateCreating || v.Status.State == "":
		return false, "the volume is being created"
	case v.Status.Robustness == longhorn.VolumeRobustnessFaulted:
		return false, "the volume is faulted"
	case v.Status.RestoreRequired:
		return false, "the volume is being restored from " + v.Spec.FromBackup
	case v.Spec.DataSource != "" && v.Status.CloneStatus.State == "failed":
		return false, "the clone from " + v.Spec.DataSource + " failed; it is tried again"
	case v.Spec.DataSource != "" && v.Status.CloneStatus.State != "completed":
		return false, "the volume is being cloned from " + v.Spec.DataSource
	}
	for _, c := range v.Status.Conditions {
		if c.Type == "Scheduled" && c.Status == longhorn.ConditionStatusFalse {
			return false, "the volume's replicas cannot be scheduled: " + c.Message
		}
	}
	return true, ""
}

func instanceAddress(st longhorn.InstanceStatus) string {
	if st.IP == "" || st.Port == 0 {
		return ""
	}
	return net.JoinHostPort(st.IP, strconv.Itoa(st.Port))
}

// volumeControllers is the volume's engine as Longhorn's controllers list.
func volumeControllers(e *longhorn.Engine) []VolumeController {
	if e == nil {
		return []VolumeController{}
	}
	return []VolumeController{{
		volumeInstance: volumeInstance{Name: e.Name, HostID: e.Spec.NodeID, Address: instanceAddress(e.Status.InstanceStatus),
			Running: e.Status.CurrentState == longhorn.InstanceStateRunning, Image: cmp.Or(e.Spec.Image, e.Status.CurrentImage), CurrentImage: e.Status.CurrentImage,
			InstanceManagerName: e.Status.InstanceManagerName},
		Size: strconv.FormatInt(e.Spec.VolumeSize, 10), ActualSize: strconv.FormatInt(e.Status.CurrentSize, 10),
		Endpoint: e.Status.Endpoint, LastRestoredBackup: e.Status.LastRestoredBackup, RequestedBackupRestore: e.Spec.RequestedBackupRestore,
		IsExpanding: e.Status.IsExpanding, LastExpansionError: e.Status.LastExpansionError, LastExpansionFailedAt: e.Status.LastExpansionFailedAt,
	}}
}

// volumeBackupStatus lists the backups the engine runs or ran.
func volumeBackupStatus(e *longhorn.Engine) []VolumeBackupStatus {
	out := []VolumeBackupStatus{}
	if e == nil {
		return out
	}
	for name, b := range e.Status.BackupStatus {
		if b == nil {
			continue
		}
		out = append(out, VolumeBackupStatus{
			Resource: Resource{ID: name, Type: "backupStatus", Links: map[string]string{}, Actions: map[string]string{}},
			Name:     name, Snapshot: b.SnapshotName, Progress: b.Progress, BackupURL: b.BackupURL, Error: b.Error, State: b.State, Replica: b.ReplicaAddress,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// VolumeRebuildStatus is a replica's rebuild as Longhorn's API and UI
// show it (the UI's volume page draws its progress).
type VolumeRebuildStatus struct {
	Resource
	Replica      string `json:"replica"`
	IsRebuilding bool   `json:"isRebuilding"`
	Progress     int    `json:"progress"`
	State        string `json:"state"`
	Error        string `json:"error"`
	FromReplica  string `json:"fromReplica"`
}

func volumeRebuildStatus(e *longhorn.Engine) []VolumeRebuildStatus {
	out := []VolumeRebuildStatus{}
	if e == nil {
		return out
	}
	for name, r := range e.Status.RebuildStatus {
		if r == nil {
			continue
		}
		out = append(out, VolumeRebuildStatus{
			Resource: Resource{ID: name, Type: "rebuildStatus", Links: map[string]string{}, Actions: map[string]string{}},
			Replica:  name, IsRebuilding: r.IsRebuilding, Progress: r.Progress, State: r.State, Error: r.Error, FromReplica: r.FromReplicaAddress,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Replica < out[j].Replica })
	return out
}

// volumeReplicas lists a volume's replicas from the cache, by name, with
// their mode in the engine.
func (s *Server) volumeReplicas(volume string, modes map[string]longhorn.ReplicaMode) []VolumeReplica {
	list, err := s.ds.ListVolumeReplicasRO(volume)
	out := make([]VolumeReplica, 0, len(list))
	if err != nil {
		return out
	}
	for _, r := range list {
		out = append(out, VolumeReplica{
			volumeInstance: volumeInstance{Name: r.Name, HostID: r.Spec.NodeID, Address: instanceAddress(r.Status.InstanceStatus),
				Running: r.Status.CurrentState == longhorn.InstanceStateRunning, Image: r.Spec.Image, CurrentImage: r.Status.CurrentImage,
				InstanceManagerName: r.Status.InstanceManagerName},
			DiskID: r.Spec.DiskID, DiskPath: r.Spec.DiskPath,
			DataPath: filepath.Join(r.Spec.DiskPath, "replicas", r.Spec.DataDirectoryName), Mode: string(modes[r.Name]),
			FailedAt: r.Spec.FailedAt, DataEngine: string(longhorn.DataEngineTypeV1), HealthyAt: r.Spec.HealthyAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func toSetting(base string, name types.SettingName, value string, applied bool) Setting {
	def, _ := types.GetSettingDefinition(name)
	d := SettingDefinition{DisplayName: def.DisplayName, Description: def.Description, Category: def.Category, Type: string(def.Type), Default: def.Default}
	if def.Type == types.SettingTypeInt {
		min, max := def.Min, def.Max
		d.Min, d.Max = &min, &max
	}
	return Setting{Resource: resource(base, "setting", "settings", string(name)), Name: string(name), Value: value, Applied: applied, Definition: d}
}

func toNode(base string, n *longhorn.Node) Node {
	disks := map[string]Disk{}
	names := make([]string, 0, len(n.Spec.Disks))
	for name := range n.Spec.Disks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := n.Spec.Disks[name]
		d := Disk{Path: spec.Path, AllowScheduling: spec.AllowScheduling, StorageReserved: spec.StorageReserved,
			Conditions: map[string]longhorn.Condition{}, DiskType: "filesystem", Tags: nonNil(spec.Tags),
			ScheduledReplica: map[string]int64{}, ScheduledBackingImage: map[string]int64{}}
		if st := n.Status.DiskStatus[name]; st != nil {
			d.DiskUUID, d.StorageAvailable, d.StorageMaximum, d.StorageScheduled, d.Conditions =
				st.DiskUUID, st.StorageAvailable, st.StorageMaximum, st.StorageScheduled, conditionMap(st.Conditions)
		}
		disks[name] = d
	}
	return Node{Resource: resource(base, "node", "nodes", n.Name), Name: n.Name, AllowScheduling: n.Spec.AllowScheduling, Conditions: conditionMap(n.Status.Conditions), Disks: disks,
		Tags: nonNil(n.Spec.Tags)}
}
