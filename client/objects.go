package client

import (
	"context"
	"net/http"
	"net/url"
)

// VolumeCreate is the body of a volume's creation, as Longhorn's API
// takes it.
type VolumeCreate struct {
	Name                string `json:"name"`
	Size                string `json:"size"`
	NumberOfReplicas    int    `json:"numberOfReplicas,omitempty"`
	StaleReplicaTimeout int    `json:"staleReplicaTimeout,omitempty"`
	FromBackup          string `json:"fromBackup,omitempty"`
	DataSource          string `json:"dataSource,omitempty"`
	BackingImage        string `json:"backingImage,omitempty"`
	DataEngine          string `json:"dataEngine,omitempty"`
	// FreezeFilesystemForSnapshot is ignored, enabled or disabled.
	FreezeFilesystemForSnapshot string                 `json:"freezeFilesystemForSnapshot,omitempty"`
	RecurringJobSelector        []RecurringJobSelector `json:"recurringJobSelector,omitempty"`
	// SelectedNode is the node whose disks take the replicas; any when
	// empty.
	SelectedNode string `json:"selectedNode,omitempty"`
	// Replica anti-affinity overrides (ignored, enabled, disabled) and
	// the tags a replica's node and disk need.
	ReplicaSoftAntiAffinity     string   `json:"replicaSoftAntiAffinity,omitempty"`
	ReplicaZoneSoftAntiAffinity string   `json:"replicaZoneSoftAntiAffinity,omitempty"`
	ReplicaDiskSoftAntiAffinity string   `json:"replicaDiskSoftAntiAffinity,omitempty"`
	NodeSelector                []string `json:"nodeSelector,omitempty"`
	DiskSelector                []string `json:"diskSelector,omitempty"`
	// DataLocality is disabled (or empty) or strict-local.
	DataLocality string `json:"dataLocality,omitempty"`
}

// RecurringJobSelector is a job or a group a volume selects.
type RecurringJobSelector struct {
	Name    string `json:"name"`
	IsGroup bool   `json:"isGroup"`
}

// CreateVolume creates a volume.
func (c *Client) CreateVolume(ctx context.Context, in VolumeCreate) (*Volume, error) {
	v := &Volume{}
	return v, c.do(ctx, http.MethodPost, "/v1/volumes", in, v)
}

// DeleteVolume deletes a volume.
func (c *Client) DeleteVolume(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/volumes/"+url.PathEscape(name), nil, nil)
}

// Volumes lists the volumes.
func (c *Client) Volumes(ctx context.Context) ([]Volume, error) {
	var list struct{ Data []Volume }
	return list.Data, c.do(ctx, http.MethodGet, "/v1/volumes", nil, &list)
}

// AttachForWorkload attaches a volume to node with its frontend, as a
// user or a workload does (taking it over from a recurring job's run).
func (c *Client) AttachForWorkload(ctx context.Context, volume, node string) error {
	return c.action(ctx, "volumes", volume, "attach", map[string]any{"hostId": node}, nil)
}

// Node is a node as the API shows it.
type Node struct {
	Name string `json:"name"`
	// Conditions are keyed by type (Ready, Schedulable).
	Conditions      map[string]Condition `json:"conditions"`
	Disks           map[string]NodeDisk  `json:"disks"`
	AllowScheduling bool                 `json:"allowScheduling"`
}

// Ready says whether the node's manager runs (its Ready condition).
func (n *Node) Ready() bool { return n.Conditions["Ready"].Status == "True" }

// NodeDisk is one disk of a node: its size (storageMaximum, 0 until it is
// probed), the bytes reserved for other uses, and the sizes of the
// replicas it holds (storageScheduled), in bytes.
type NodeDisk struct {
	DiskUUID         string               `json:"diskUUID"`
	StorageMaximum   int64                `json:"storageMaximum"`
	StorageReserved  int64                `json:"storageReserved"`
	StorageScheduled int64                `json:"storageScheduled"`
	StorageAvailable int64                `json:"storageAvailable"`
	Conditions       map[string]Condition `json:"conditions"`
	AllowScheduling  bool                 `json:"allowScheduling"`
}

// Ready says whether the disk is usable (its Ready condition).
func (d NodeDisk) Ready() bool { return d.Conditions["Ready"].Status == "True" }

// Node reads a node.
func (c *Client) Node(ctx context.Context, name string) (*Node, error) {
	n := &Node{}
	return n, c.do(ctx, http.MethodGet, "/v1/nodes/"+url.PathEscape(name), nil, n)
}

// Nodes lists the nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var list struct{ Data []Node }
	return list.Data, c.do(ctx, http.MethodGet, "/v1/nodes", nil, &list)
}

// RecurringJob is a recurring job as the API shows and takes it.
type RecurringJob struct {
	Name        string            `json:"name"`
	Task        string            `json:"task"`
	Cron        string            `json:"cron"`
	Retain      int               `json:"retain"`
	Concurrency int               `json:"concurrency"`
	Groups      []string          `json:"groups"`
	Labels      map[string]string `json:"labels"`
}

// RecurringJobs lists the recurring jobs.
func (c *Client) RecurringJobs(ctx context.Context) ([]RecurringJob, error) {
	var list struct{ Data []RecurringJob }
	return list.Data, c.do(ctx, http.MethodGet, "/v1/recurringjobs", nil, &list)
}

// RecurringJob reads one recurring job; a job the API's cache does not
// show yet is read from the apiserver, so NotFound means it does not
// exist.
func (c *Client) RecurringJob(ctx context.Context, name string) (RecurringJob, error) {
	var job RecurringJob
	return job, c.do(ctx, http.MethodGet, "/v1/recurringjobs/"+url.PathEscape(name), nil, &job)
}

// CreateRecurringJob creates a recurring job.
func (c *Client) CreateRecurringJob(ctx context.Context, job RecurringJob) error {
	return c.do(ctx, http.MethodPost, "/v1/recurringjobs", job, nil)
}

// DeleteRecurringJob deletes a recurring job.
func (c *Client) DeleteRecurringJob(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/recurringjobs/"+url.PathEscape(name), nil, nil)
}

// BackingImage is a backing image as the API shows and takes it.
type BackingImage struct {
	Name             string            `json:"name"`
	SourceType       string            `json:"sourceType"`
	Parameters       map[string]string `json:"parameters"`
	ExpectedChecksum string            `json:"expectedChecksum"`
	CurrentChecksum  string            `json:"currentChecksum,omitempty"`
	// MinNumberOfCopies is how many disks keep its file (0: 1).
	MinNumberOfCopies int `json:"minNumberOfCopies,omitempty"`
	// What the API shows and a create does not take (empty, so not sent).
	// Size is the file's bytes, once known; DiskFileStatusMap each
	// disk's file, by disk UUID; DeletionTimestamp is set once it is
	// being deleted.
	Size              int64                            `json:"size,omitempty"`
	DiskFileStatusMap map[string]BackingImageFileState `json:"diskFileStatusMap,omitempty"`
	DeletionTimestamp string                           `json:"deletionTimestamp,omitempty"`
}

// BackingImageFileState is one disk's file of a backing image.
type BackingImageFileState struct {
	// State is pending, starting, in-progress, ready-for-transfer,
	// ready, failed or unknown.
	State    string `json:"state"`
	Progress int    `json:"progress"`
	Message  string `json:"message"`
}

// ReadyFile says whether a disk holds the image's whole file.
func (b *BackingImage) ReadyFile() bool {
	for _, f := range b.DiskFileStatusMap {
		if f.State == "ready" {
			return true
		}
	}
	return false
}

// BackingImage reads a backing image.
func (c *Client) BackingImage(ctx context.Context, name string) (*BackingImage, error) {
	b := &BackingImage{}
	return b, c.do(ctx, http.MethodGet, "/v1/backingimages/"+url.PathEscape(name), nil, b)
}

// CreateBackingImage creates a backing image.
func (c *Client) CreateBackingImage(ctx context.Context, in BackingImage) error {
	return c.do(ctx, http.MethodPost, "/v1/backingimages", in, nil)
}

// DeleteBackingImage deletes a backing image (refused, 409, while a
// volume uses it).
func (c *Client) DeleteBackingImage(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/backingimages/"+url.PathEscape(name), nil, nil)
}
