package api

import (
	"path/filepath"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strconv"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// RecurringJob is the API view of a RecurringJob.
type RecurringJob struct {
	Resource
	Name                    string                     `json:"name"`
	Groups                  []string                   `json:"groups"`
	Task                    longhorn.RecurringJobType  `json:"task"`
	Cron                    string                     `json:"cron"`
	Retain                  int                        `json:"retain"`
	Concurrency             int                        `json:"concurrency"`
	Labels                  map[string]string          `json:"labels"`
	Conditions              []longhorn.Condition       `json:"conditions"`
	Suspend                 bool                       `json:"suspend"`
	TimeZone                string                     `json:"timeZone"`
	StartingDeadlineSeconds *int64                     `json:"startingDeadlineSeconds"`
	SkipImmediately         bool                       `json:"skipImmediately"`
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
	Concurrency             *int                      `json:"concurrency"`
	Labels                  map[string]string         `json:"labels"`
	Suspend                 *bool                     `json:"suspend"`
	TimeZone                *string                   `json:"timeZone"`
	StartingDeadlineSeconds *int64                    `json:"startingDeadlineSeconds"`
	SkipImmediately         *bool                     `json:"skipImmediately"`
}

// Volume is the API view of a Volume.
type Volume struct {
	Resource
	Name                 string                               `json:"name"`
	Size                 string                               `json:"size"`
	NumberOfReplicas     int                                  `json:"numberOfReplicas"`
	Frontend             longhorn.VolumeFrontend              `json:"frontend"`
	BackingImage         string                               `json:"backingImage"`
	State                longhorn.VolumeState                 `json:"state"`
	Robustness           longhorn.VolumeRobustness            `json:"robustness"`
	CurrentNodeID        string                               `json:"currentNodeID"`
	NodeID               string                               `json:"nodeID"`
	AttachedBy           string                               `json:"attachedBy"`
	FrontendDisabled     bool                                 `json:"frontendDisabled"`
	Endpoint             string                               `json:"endpoint"`
	RecurringJobSelector []datastore.RecurringJobSelectorItem `json:"recurringJobSelector"`
	Conditions           []longhorn.Condition                 `json:"conditions"`
	// Replicas are the volume's replicas and where they are: the volume
	// attaches only to the node that holds them.
	Replicas []VolumeReplica `json:"replicas"`
}

// VolumeReplica is one replica of a volume, as Longhorn's API shows it.
type VolumeReplica struct {
	Name     string `json:"name"`
	HostID   string `json:"hostId"`
	DiskID   string `json:"diskID"`
	DiskPath string `json:"diskPath"`
	DataPath string `json:"dataPath"`
	Running  bool   `json:"running"`
	// HealthyAt is when an engine first opened the replica's data; empty
	// while it has none yet.
	HealthyAt string `json:"healthyAt"`
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
}

// SettingInput is the body of a setting update.
type SettingInput struct {
	Value string `json:"value"`
}

// Node is the API view of a Node.
type Node struct {
	Resource
	Name            string               `json:"name"`
	AllowScheduling bool                 `json:"allowScheduling"`
	Conditions      []longhorn.Condition `json:"conditions"`
	Disks           map[string]Disk      `json:"disks"`
}

// Disk is one disk of a Node, with its spec and observed status.
type Disk struct {
	Path             string               `json:"path"`
	DiskUUID         string               `json:"diskUUID"`
	AllowScheduling  bool                 `json:"allowScheduling"`
	StorageReserved  int64                `json:"storageReserved"`
	StorageAvailable int64                `json:"storageAvailable"`
	StorageMaximum   int64                `json:"storageMaximum"`
	StorageScheduled int64                `json:"storageScheduled"`
	Conditions       []longhorn.Condition `json:"conditions"`
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
		Retain: j.Spec.Retain, Concurrency: j.Spec.Concurrency, Labels: labels, Conditions: conditions(j.Status.Conditions),
		Suspend: j.Spec.Suspend, TimeZone: j.Spec.TimeZone, StartingDeadlineSeconds: j.Spec.StartingDeadlineSeconds,
		SkipImmediately:  j.Spec.SkipImmediately != nil && *j.Spec.SkipImmediately,
		LastScheduleTime: j.Status.LastScheduleTime, LastSkipped: j.Status.LastSkipped,
		NextScheduleTime: j.Status.NextScheduleTime, LastSuccessfulTime: j.Status.LastSuccessfulTime,
		Active: active, ExecutionCount: j.Status.ExecutionCount,
	}
}

// volumeActions are offered in every volume state; snapshotActions while
// the volume is attached.
var (
	volumeActions   = []string{"recurringJobAdd", "recurringJobDelete", "recurringJobList", "attach", "detach"}
	snapshotActions = []string{"snapshotCreate", "snapshotList", "snapshotGet", "snapshotDelete", "snapshotPurge", "snapshotRevert", "snapshotBackup"}
)

func (s *Server) toVolume(base string, v *longhorn.Volume) Volume {
	r := resource(base, "volume", "volumes", v.Name)
	actions := volumeActions
	if v.Status.State == longhorn.VolumeStateAttached {
		actions = append(append([]string{}, volumeActions...), snapshotActions...)
	}
	for _, a := range actions {
		r.Actions[a] = r.Links["self"] + "?action=" + a
	}
	selector := datastore.RecurringJobSelector(v.Labels)
	if selector == nil {
		selector = []datastore.RecurringJobSelectorItem{}
	}
	return Volume{
		Resource: r, Name: v.Name, Size: strconv.FormatInt(v.Spec.Size, 10), NumberOfReplicas: v.Spec.NumberOfReplicas,
		Frontend: v.Spec.Frontend, BackingImage: v.Spec.BackingImage, State: v.Status.State, Robustness: v.Status.Robustness,
		CurrentNodeID: v.Status.CurrentNodeID, NodeID: v.Spec.NodeID, AttachedBy: attachedBy(v), RecurringJobSelector: selector, Conditions: conditions(v.Status.Conditions),
		FrontendDisabled: v.Status.FrontendDisabled, Endpoint: s.volumeEndpoint(v.Name), Replicas: s.volumeReplicas(v.Name),
	}
}

// volumeReplicas lists a volume's replicas from the cache, by name.
func (s *Server) volumeReplicas(volume string) []VolumeReplica {
	list, err := s.ds.ListVolumeReplicasRO(volume)
	out := make([]VolumeReplica, 0, len(list))
	if err != nil {
		return out
	}
	for _, r := range list {
		out = append(out, VolumeReplica{Name: r.Name, HostID: r.Spec.NodeID, DiskID: r.Spec.DiskID, DiskPath: r.Spec.DiskPath,
			DataPath: filepath.Join(r.Spec.DiskPath, "replicas", r.Spec.DataDirectoryName), Running: r.Status.CurrentState == longhorn.InstanceStateRunning,
			HealthyAt: r.Spec.HealthyAt})
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
		d := Disk{Path: spec.Path, AllowScheduling: spec.AllowScheduling, StorageReserved: spec.StorageReserved}
		if st := n.Status.DiskStatus[name]; st != nil {
			d.DiskUUID, d.StorageAvailable, d.StorageMaximum, d.StorageScheduled, d.Conditions =
				st.DiskUUID, st.StorageAvailable, st.StorageMaximum, st.StorageScheduled, conditions(st.Conditions)
		}
		disks[name] = d
	}
	return Node{Resource: resource(base, "node", "nodes", n.Name), Name: n.Name, AllowScheduling: n.Spec.AllowScheduling, Conditions: conditions(n.Status.Conditions), Disks: disks}
}
