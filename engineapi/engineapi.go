// Package engineapi is how the manager talks to a volume's engine: the
// EngineClient interface, in Longhorn's types, and its gRPC
// implementation. Every call carries a deadline.
package engineapi

import (
	"context"
	"errors"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

var (
	// ErrNotFound: the volume's engine or the snapshot does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request breaks a rule.
	ErrInvalid = errors.New("invalid request")
	// ErrPrecondition: the volume's state forbids the request now.
	ErrPrecondition = errors.New("not allowed in the volume's state")
	// ErrUnavailable: the engine cannot serve (no healthy replica, or
	// not reachable).
	ErrUnavailable = errors.New("engine unavailable")
)

// Volume is what an engine reports about its volume.
type Volume struct {
	Name         string
	Size         int64
	ReplicaModes map[string]longhorn.ReplicaMode
}

// EngineClient operates one volume's engine.
type EngineClient interface {
	VolumeGet(ctx context.Context) (*Volume, error)
	// SnapshotCreate takes a snapshot named name (generated when empty)
	// and returns its name.
	SnapshotCreate(ctx context.Context, name string, labels map[string]string) (string, error)
	// SnapshotList returns the snapshots and volume-head by name.
	SnapshotList(ctx context.Context) (map[string]*longhorn.SnapshotInfo, error)
	SnapshotGet(ctx context.Context, name string) (*longhorn.SnapshotInfo, error)
	SnapshotDelete(ctx context.Context, name string) error
	SnapshotRevert(ctx context.Context, name string) error
	// SnapshotPurge starts a purge of removed snapshots.
	SnapshotPurge(ctx context.Context) error
	// SnapshotPurgeStatus reports the purge, by replica address as
	// Longhorn's engine does; this engine reports one entry.
	SnapshotPurgeStatus(ctx context.Context) (map[string]*longhorn.PurgeStatus, error)
	// SnapshotBackup starts the backup req describes and returns its name.
	SnapshotBackup(ctx context.Context, req BackupRequest) (string, error)
	// BackupStatus reports the backups the engine ran, by backup name.
	BackupStatus(ctx context.Context) (map[string]*longhorn.EngineBackupStatus, error)
	// BackupRestore writes the backup at backupURL into the volume; cred
	// as for SnapshotBackup.
	BackupRestore(ctx context.Context, backupURL string, cred map[string]string) error
	// RestoreStatus reports the last restore, by replica address as
	// Longhorn's engine does; this engine reports one entry.
	RestoreStatus(ctx context.Context) (map[string]*longhorn.RestoreStatus, error)
	// FilesystemTrim runs fstrim on the filesystem mounted from the
	// volume on the engine's node, within FilesystemTrimTimeout; a volume
	// with no mounted filesystem there is ErrPrecondition.
	FilesystemTrim(ctx context.Context) (*FilesystemTrimResult, error)
	Close() error
}

// FilesystemTrimResult is where the filesystem trimmed is mounted and the
// bytes fstrim discarded.
type FilesystemTrimResult struct {
	MountPoint   string
	TrimmedBytes int64
}

// FilesystemTrimTimeout bounds a trim: within the API's write timeout
// (api.DefaultTimeouts) and the API client's (client.NewClient), so the
// action answers its caller.
const FilesystemTrimTimeout = 50 * time.Second

// BackupRequest says what SnapshotBackup backs up, and how.
type BackupRequest struct {
	// Name of the backup; generated when empty.
	Name     string
	Snapshot string
	// Target is the backup-target URL; Credential the data of the
	// backup-target-credential-secret (nil when none is set).
	Target     string
	Credential map[string]string
	Labels     map[string]string
	// Compression and Concurrency are the backup-compression-method and
	// backup-concurrent-limit settings (the engine's defaults when empty).
	Compression string
	Concurrency int
	// Full asks for a full backup (Longhorn's backupMode full): every
	// block uploaded again, nothing taken from the last backup.
	Full bool
}
