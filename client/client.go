// Package client is a Go client of the manager's /v1 API, as Longhorn's
// own components use it: a recurring job's CronJob pod and the CSI driver.
// It retries what may pass (a refused connection, a 5xx, a 429).
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"time"

	"github.com/cadence-storage/longhorn-manager/types"
)

// Client calls the manager's /v1 API, retrying what may pass: a refused
// connection, a 5xx, a 429.
type Client struct {
	base     string
	http     *http.Client
	retryFor time.Duration
	// Token, when set, gives the bearer token sent with each request, for
	// a manager started with --api-auth=kubernetes.
	Token func() string
}

// NewClient returns a client of the manager at url (such as
// http://longhorn-backend:9500/v1) that retries for up to retryFor.
func NewClient(url string, retryFor time.Duration) *Client {
	return &Client{base: strings.TrimSuffix(strings.TrimSuffix(url, "/"), "/v1"), http: &http.Client{Timeout: 60 * time.Second}, retryFor: retryFor}
}

// SetTLS makes the client speak TLS with cfg to a manager at an https://
// URL (a manager started with --api-tls; see mtls.APIClientConfig).
func (c *Client) SetTLS(cfg *tls.Config) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	c.http.Transport = t
}

// APIError is an answer the manager gave with a 4xx status.
type APIError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// IsNotFound reports whether the manager answered 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// CodeNoMountedFilesystem is the code of a trimFilesystem refused because
// no filesystem is mounted from the volume on its node (a raw block
// volume, one no pod mounts, one without a frontend).
const CodeNoMountedFilesystem = "NoMountedFilesystem"

// IsNoMountedFilesystem reports a trimFilesystem refused so.
func IsNoMountedFilesystem(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == CodeNoMountedFilesystem
}

// do sends a request and decodes the JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(c.retryFor)
	wait := 200 * time.Millisecond
	for {
		err, retry := c.once(ctx, method, path, body, out)
		if err == nil || !retry || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) (error, bool) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err, false
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != nil {
		if token := c.Token(); token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err), ctx.Err() == nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err, true
	}
	if resp.StatusCode >= 400 {
		ae := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(data, ae)
		if ae.Message == "" {
			ae.Message = strings.TrimSpace(string(data))
		}
		retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		return fmt.Errorf("%s %s: %w", method, path, ae), retry
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: the answer is not JSON: %w", method, path, err), false
		}
	}
	return nil, false
}

// Snapshot is a snapshot as the API lists it.
type Snapshot struct {
	Name        string            `json:"name"`
	Removed     bool              `json:"removed"`
	UserCreated bool              `json:"usercreated"`
	Created     string            `json:"created"`
	Labels      map[string]string `json:"labels"`
	// Size is how many bytes of data the snapshot holds, in decimal.
	Size string `json:"size"`
}

// Backup is a backup as the API lists it.
type Backup struct {
	Name         string            `json:"name"`
	State        string            `json:"state"`
	SnapshotName string            `json:"snapshotName"`
	Created      string            `json:"created"`
	Labels       map[string]string `json:"labels"`
	Error        string            `json:"error"`
	URL          string            `json:"url"`
	// VolumeName is the volume backed up; VolumeSize its size in bytes
	// (decimal) then; SnapshotCreated when its snapshot was taken
	// (RFC 3339).
	VolumeName      string `json:"volumeName"`
	VolumeSize      string `json:"volumeSize"`
	SnapshotCreated string `json:"snapshotCreated"`
	// BackupMode is full or incremental.
	BackupMode string `json:"backupMode"`
	// Verification is the backup's last drill; VerifyRequestedAt when
	// one was last asked for (see backup_verify.go).
	Verification      *BackupVerification `json:"verification"`
	VerifyRequestedAt string              `json:"verifyRequestedAt"`
	// BackupTargetName is the target the backup is in.
	BackupTargetName string `json:"backupTargetName"`
}

// Volume is a volume as the API shows it.
type Volume struct {
	Name string `json:"name"`
	// Size is in bytes, as a decimal string.
	Size          string `json:"size"`
	State         string `json:"state"`
	Robustness    string `json:"robustness"`
	CurrentNodeID string `json:"currentNodeID"`
	// NodeID is the node the volume is to be attached to ("" when it is
	// to be detached); AttachedBy names who attached it when that was a
	// recurring job's run ("" for a user or workload).
	NodeID     string `json:"nodeID"`
	AttachedBy string `json:"attachedBy"`
	// Replicas say where the volume's data is: it attaches only there.
	Replicas []VolumeReplica `json:"replicas"`
	// RecurringJobSelector are the jobs and groups the volume selects.
	RecurringJobSelector []RecurringJobSelector `json:"recurringJobSelector"`
	// Frontend is the frontend the volume asks for ("blockdev").
	Frontend string `json:"frontend"`
	// BackupTargetName is the BackupTarget the volume's backups go to.
	BackupTargetName string `json:"backupTargetName"`
	// DisableFrontend says the volume is to be attached without its
	// frontend; FrontendDisabled that it is attached so.
	DisableFrontend  bool `json:"disableFrontend"`
	FrontendDisabled bool `json:"frontendDisabled"`
	// BackingImage is the backing image the volume reads under its own
	// data, "" for none.
	BackingImage string `json:"backingImage"`
	// Endpoint is the NBD URI of the attached volume's frontend,
	// nbd://HOST:PORT/NAME; "" while it has none.
	Endpoint string `json:"endpoint"`
	// FromBackup and DataSource say what the volume is made from: a
	// backup's URL, or another volume (vol://, snap://); CloneStatus and
	// the Restore and Clone conditions say whether it holds it yet.
	FromBackup  string      `json:"fromBackup"`
	DataSource  string      `json:"dataSource"`
	CloneStatus CloneStatus `json:"cloneStatus"`
	// Conditions are keyed by type, as Longhorn's API has them.
	Conditions map[string]Condition `json:"conditions"`
	// Controllers is the volume's engine; its ActualSize is the size the
	// data plane has (see ActualSize).
	Controllers []VolumeController `json:"controllers"`
}

// CloneStatus is how far a volume made with a dataSource is.
type CloneStatus struct {
	SourceVolume string `json:"sourceVolume"`
	Snapshot     string `json:"snapshot"`
	// State is initiated, completed or failed.
	State string `json:"state"`
}

// Condition is one of a volume's conditions.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// VolumeController is a volume's engine as the API lists it.
type VolumeController struct {
	// ActualSize is the engine's size in bytes, as a decimal string.
	ActualSize string `json:"actualSize"`
	// InstanceManagerName is the InstanceManager the engine runs in; ""
	// when it runs in no pod of its own.
	InstanceManagerName string `json:"instanceManagerName"`
}

// InstanceManagerName is the InstanceManager the volume's engine runs in:
// where its device is made. "" when it has none or runs in no pod of its
// own.
func (v *Volume) InstanceManagerName() string {
	for _, c := range v.Controllers {
		if c.InstanceManagerName != "" {
			return c.InstanceManagerName
		}
	}
	return ""
}

// VolumeReplica is a replica of a volume and the node that holds it.
type VolumeReplica struct {
	Name   string `json:"name"`
	HostID string `json:"hostId"`
}

// ReplicasNode is the node the volume's engine is best started on
// (types.ReplicasNode): the one holding the most of its replicas, or ""
// when none is placed.
func (v *Volume) ReplicasNode() string {
	sorted := slices.Clone(v.Replicas)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	nodes := make([]string, len(sorted))
	for i, r := range sorted {
		nodes[i] = r.HostID
	}
	return types.ReplicasNode(nodes)
}

func (c *Client) action(ctx context.Context, kind, name, action string, in, out any) error {
	if in == nil {
		in = struct{}{}
	}
	return c.do(ctx, http.MethodPost, "/v1/"+kind+"/"+name+"?action="+action, in, out)
}

// Volume reads a volume.
func (c *Client) Volume(ctx context.Context, name string) (*Volume, error) {
	v := &Volume{}
	return v, c.do(ctx, http.MethodGet, "/v1/volumes/"+name, nil, v)
}

// Attach attaches a volume to node without a frontend in the name of
// attachedBy; the manager answers 409 when someone else attaches it.
func (c *Client) Attach(ctx context.Context, volume, node, attachedBy string) error {
	return c.action(ctx, "volumes", volume, "attach", map[string]any{"hostId": node, "disableFrontend": true, "attachedBy": attachedBy}, nil)
}

// Detach detaches a volume attached in the name of attachedBy; the
// manager answers 409, leaving it attached, when it is someone else's now.
func (c *Client) Detach(ctx context.Context, volume, attachedBy string) error {
	return c.action(ctx, "volumes", volume, "detach", map[string]string{"attachedBy": attachedBy}, nil)
}

// Snapshots lists a volume's snapshots, volume-head excluded.
func (c *Client) Snapshots(ctx context.Context, volume string) ([]Snapshot, error) {
	var list struct{ Data []Snapshot }
	if err := c.action(ctx, "volumes", volume, "snapshotList", nil, &list); err != nil {
		return nil, err
	}
	out := list.Data[:0]
	for _, s := range list.Data {
		if s.Name != "volume-head" {
			out = append(out, s)
		}
	}
	return out, nil
}

// WrittenBytes is how many bytes of data an attached volume's snapshots
// and its head hold: 0 for a volume nothing was ever written to.
func (c *Client) WrittenBytes(ctx context.Context, volume string) (int64, error) {
	var list struct{ Data []Snapshot }
	if err := c.action(ctx, "volumes", volume, "snapshotList", nil, &list); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range list.Data {
		n, err := strconv.ParseInt(s.Size, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("snapshot %s of volume %s: size %q is not a number", s.Name, volume, s.Size)
		}
		total += n
	}
	return total, nil
}

func (c *Client) CreateSnapshot(ctx context.Context, volume, name string, labels map[string]string) error {
	return c.action(ctx, "volumes", volume, "snapshotCreate", map[string]any{"name": name, "labels": labels}, nil)
}

func (c *Client) DeleteSnapshot(ctx context.Context, volume, name string) error {
	return c.action(ctx, "volumes", volume, "snapshotDelete", map[string]string{"name": name}, nil)
}

func (c *Client) Purge(ctx context.Context, volume string) error {
	return c.action(ctx, "volumes", volume, "snapshotPurge", nil, nil)
}

// TrimFilesystem runs fstrim on the filesystem mounted from an attached
// volume, on its node (Longhorn's trimFilesystem), and returns when done.
func (c *Client) TrimFilesystem(ctx context.Context, volume string) error {
	return c.action(ctx, "volumes", volume, "trimFilesystem", nil, nil)
}

// BackupSnapshot starts a backup and returns its name.
func (c *Client) BackupSnapshot(ctx context.Context, volume, snapshot string, labels map[string]string) (string, error) {
	return c.BackupSnapshotMode(ctx, volume, snapshot, labels, "")
}

// BackupSnapshotMode is BackupSnapshot with Longhorn's backupMode: "full"
// (every block uploaded again), "incremental" or "" (incremental).
func (c *Client) BackupSnapshotMode(ctx context.Context, volume, snapshot string, labels map[string]string, mode string) (string, error) {
	return c.BackupSnapshotTo(ctx, volume, snapshot, labels, mode, "")
}

// BackupSnapshotTo is BackupSnapshotMode to the BackupTarget target (""
// for the volume's own).
func (c *Client) BackupSnapshotTo(ctx context.Context, volume, snapshot string, labels map[string]string, mode, target string) (string, error) {
	var out struct{ Name string }
	in := map[string]any{"name": snapshot, "labels": labels}
	if mode != "" {
		in["backupMode"] = mode
	}
	if target != "" {
		in["backupTargetName"] = target
	}
	err := c.action(ctx, "volumes", volume, "snapshotBackup", in, &out)
	return out.Name, err
}

// Setting reads a setting's value.
func (c *Client) Setting(ctx context.Context, name string) (string, error) {
	var s struct{ Value string }
	err := c.do(ctx, http.MethodGet, "/v1/settings/"+name, nil, &s)
	return s.Value, err
}

// ReadyNode returns a Ready node, to attach detached volumes to.
func (c *Client) ReadyNode(ctx context.Context) (string, error) {
	var list struct {
		Data []struct {
			Name string
			// Keyed by type, as Longhorn's API has them.
			Conditions map[string]struct{ Status string }
		}
	}
	if err := c.do(ctx, http.MethodGet, "/v1/nodes", nil, &list); err != nil {
		return "", err
	}
	for _, n := range list.Data {
		if n.Conditions["Ready"].Status == "True" {
			return n.Name, nil
		}
	}
	return "", errors.New("no Ready node to attach detached volumes to")
}
