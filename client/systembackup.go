package client

import (
	"context"
	"net/http"
	"net/url"
)

// SystemBackup is a system backup as the API shows it.
type SystemBackup struct {
	Name               string `json:"name"`
	VolumeBackupPolicy string `json:"volumeBackupPolicy"`
	Version            string `json:"version"`
	State              string `json:"state"`
	CreatedAt          string `json:"createdAt"`
	Error              string `json:"error"`
}

// CreateSystemBackup asks for a system backup of the cluster, with the
// volume backups policy asks for ("" is if-not-present).
func (c *Client) CreateSystemBackup(ctx context.Context, name, policy string) (*SystemBackup, error) {
	sb := &SystemBackup{}
	return sb, c.do(ctx, http.MethodPost, "/v1/systembackups", map[string]string{"name": name, "volumeBackupPolicy": policy}, sb)
}

// SystemBackup reads a system backup.
func (c *Client) SystemBackup(ctx context.Context, name string) (*SystemBackup, error) {
	sb := &SystemBackup{}
	return sb, c.do(ctx, http.MethodGet, "/v1/systembackups/"+url.PathEscape(name), nil, sb)
}

// SystemBackups lists the system backups.
func (c *Client) SystemBackups(ctx context.Context) ([]SystemBackup, error) {
	var list struct{ Data []SystemBackup }
	return list.Data, c.do(ctx, http.MethodGet, "/v1/systembackups", nil, &list)
}

// DeleteSystemBackup deletes a system backup and its archive.
func (c *Client) DeleteSystemBackup(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/systembackups/"+url.PathEscape(name), nil, nil)
}
