package client

import (
	"context"
	"net/http"
	"slices"
)

// SnapshotObject is a volume's Snapshot object as the API shows it
// (Longhorn's snapshotCR): it exists whether or not the volume is
// attached.
type SnapshotObject struct {
	Name   string `json:"name"`
	Volume string `json:"volume"`
	// CreationTime is when the engine took the snapshot (RFC 3339), ""
	// until it has.
	CreationTime string `json:"creationTime"`
	// RestoreSize is the size of a volume restored from it: the volume's.
	RestoreSize int64  `json:"restoreSize"`
	ReadyToUse  bool   `json:"readyToUse"`
	MarkRemoved bool   `json:"markRemoved"`
	Error       string `json:"error"`
	// Labels are the snapshot's own (what it was created with).
	Labels map[string]string `json:"labels"`
}

// SnapshotObject reads a volume's Snapshot object; 404 when the volume
// has none of the name.
func (c *Client) SnapshotObject(ctx context.Context, volume, name string) (*SnapshotObject, error) {
	s := &SnapshotObject{}
	return s, c.action(ctx, "volumes", volume, "snapshotCRGet", map[string]string{"name": name}, s)
}

// SnapshotObjects lists a volume's Snapshot objects.
func (c *Client) SnapshotObjects(ctx context.Context, volume string) ([]SnapshotObject, error) {
	var list struct{ Data []SnapshotObject }
	return list.Data, c.action(ctx, "volumes", volume, "snapshotCRList", nil, &list)
}

// DeleteSnapshotObject deletes a volume's Snapshot object; the snapshot
// controller then deletes the snapshot from the engine.
func (c *Client) DeleteSnapshotObject(ctx context.Context, volume, name string) error {
	return c.action(ctx, "volumes", volume, "snapshotCRDelete", map[string]string{"name": name}, nil)
}

// BackupVolumes lists the volumes the backup targets hold backups of,
// each once, by name.
func (c *Client) BackupVolumes(ctx context.Context) ([]string, error) {
	var list struct{ Data []backupVolumeRef }
	if err := c.do(ctx, http.MethodGet, "/v1/backupvolumes", nil, &list); err != nil {
		return nil, err
	}
	var names []string
	for _, bv := range list.Data {
		if bv.VolumeName != "" && !slices.Contains(names, bv.VolumeName) {
			names = append(names, bv.VolumeName)
		}
	}
	slices.Sort(names)
	return names, nil
}

// BackupTargetsOf lists the BackupTargets that hold a backup volume of
// the volume, by name.
func (c *Client) BackupTargetsOf(ctx context.Context, volume string) ([]string, error) {
	var list struct {
		Data []struct{ VolumeName, BackupTargetName string }
	}
	if err := c.do(ctx, http.MethodGet, "/v1/backupvolumes", nil, &list); err != nil {
		return nil, err
	}
	var out []string
	for _, bv := range list.Data {
		if bv.VolumeName == volume && !slices.Contains(out, bv.BackupTargetName) {
			out = append(out, bv.BackupTargetName)
		}
	}
	slices.Sort(out)
	return out, nil
}
