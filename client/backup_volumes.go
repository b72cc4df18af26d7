package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// A backup volume is found by its volume and its target, never by a
// name computed from them: in a target but default its name is the
// volume's and 8 hex digits (types.BackupVolumeObjectName), which is
// also the name of default's backup volume of a volume named so. Backups
// listed, waited on, verified or deleted by such a name could be another
// volume's.

// backupVolumeRef is what the API lists of a backup volume to find it.
type backupVolumeRef struct {
	Name             string `json:"name"`
	VolumeName       string `json:"volumeName"`
	BackupTargetName string `json:"backupTargetName"`
}

// targetName is target, or "default" when it is empty.
func targetName(target string) string {
	if target == "" {
		return "default"
	}
	return target
}

// backupVolumesOf lists the backup volumes of volume, in target when it
// is not empty, in every target when it is.
func (c *Client) backupVolumesOf(ctx context.Context, volume, target string) ([]backupVolumeRef, error) {
	q := url.Values{"volumeName": {volume}}
	if target != "" {
		q.Set("backupTargetName", target)
	}
	var list struct{ Data []backupVolumeRef }
	if err := c.do(ctx, http.MethodGet, "/v1/backupvolumes?"+q.Encode(), nil, &list); err != nil {
		return nil, err
	}
	// Checked here too: a manager that does not know the filter lists
	// them all.
	var out []backupVolumeRef
	for _, bv := range list.Data {
		if bv.VolumeName == volume && (target == "" || bv.BackupTargetName == target) {
			out = append(out, bv)
		}
	}
	return out, nil
}

// backupVolumeIn is the name of the backup volume of volume in target
// ("" is default); a 404 APIError when the target holds none.
func (c *Client) backupVolumeIn(ctx context.Context, volume, target string) (string, error) {
	bvs, err := c.backupVolumesOf(ctx, volume, targetName(target))
	if err != nil {
		return "", err
	}
	if len(bvs) == 0 {
		return "", &APIError{Status: http.StatusNotFound, Code: "NotFound",
			Message: fmt.Sprintf("backup target %s holds no backup volume of volume %s", targetName(target), volume)}
	}
	return bvs[0].Name, nil
}

// Backups lists a volume's backups in the default target; none when the
// target has no backup volume for it yet.
func (c *Client) Backups(ctx context.Context, volume string) ([]Backup, error) {
	return c.BackupsIn(ctx, volume, "")
}

// BackupsIn lists a volume's backups in the BackupTarget target ("" is
// default); none when the target has no backup volume for it yet.
func (c *Client) BackupsIn(ctx context.Context, volume, target string) ([]Backup, error) {
	bv, err := c.backupVolumeIn(ctx, volume, target)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list struct{ Data []Backup }
	err = c.action(ctx, "backupvolumes", bv, "backupList", nil, &list)
	if IsNotFound(err) {
		return nil, nil // deleted since it was found
	}
	out := list.Data[:0]
	for _, b := range list.Data {
		if b.BackupTargetName == "" || b.BackupTargetName == targetName(target) {
			out = append(out, b)
		}
	}
	return out, err
}

// AllBackups lists a volume's backups in every target.
func (c *Client) AllBackups(ctx context.Context, volume string) ([]Backup, error) {
	bvs, err := c.backupVolumesOf(ctx, volume, "")
	if err != nil {
		return nil, err
	}
	var out []Backup
	for _, bv := range bvs {
		var list struct{ Data []Backup }
		err := c.action(ctx, "backupvolumes", bv.Name, "backupList", nil, &list)
		if IsNotFound(err) {
			continue // deleted since it was found
		}
		if err != nil {
			return nil, err
		}
		for _, b := range list.Data {
			if b.BackupTargetName == "" || b.BackupTargetName == bv.BackupTargetName {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// BackupIn reads a backup of volume in the BackupTarget target ("" is
// default); 404 when the target has no such backup volume or backup.
func (c *Client) BackupIn(ctx context.Context, volume, target, name string) (*Backup, error) {
	bv, err := c.backupVolumeIn(ctx, volume, target)
	if err != nil {
		return nil, err
	}
	b := &Backup{}
	return b, c.action(ctx, "backupvolumes", bv, "backupGet", map[string]string{"name": name}, b)
}

// Backup reads the backup name of volume in whichever target holds it
// (a backup's name is unique among every target's); 404 when none does.
func (c *Client) Backup(ctx context.Context, volume, name string) (*Backup, error) {
	bvs, err := c.backupVolumesOf(ctx, volume, "")
	if err != nil {
		return nil, err
	}
	for _, bv := range bvs {
		b := &Backup{}
		err := c.action(ctx, "backupvolumes", bv.Name, "backupGet", map[string]string{"name": name}, b)
		if err == nil {
			return b, nil
		}
		if !IsNotFound(err) {
			return nil, err
		}
	}
	return nil, &APIError{Status: http.StatusNotFound, Code: "NotFound", Message: fmt.Sprintf("no backup target holds backup %s of volume %s", name, volume)}
}

// DeleteBackup deletes a backup of volume in the default target.
func (c *Client) DeleteBackup(ctx context.Context, volume, name string) error {
	return c.DeleteBackupIn(ctx, volume, "", name)
}

// DeleteBackupIn deletes a backup of volume in the BackupTarget target
// ("" is default); 404 when the target has no such backup volume or
// backup.
func (c *Client) DeleteBackupIn(ctx context.Context, volume, target, name string) error {
	bv, err := c.backupVolumeIn(ctx, volume, target)
	if err != nil {
		return err
	}
	return c.action(ctx, "backupvolumes", bv, "backupDelete", map[string]string{"name": name}, nil)
}
