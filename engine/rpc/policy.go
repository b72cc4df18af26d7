package rpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Policy is what the engine service checks on the calls that move a
// volume's data in or out: the caller names a backup target and sends a
// credential, so without it anyone who reaches the service could back a
// volume up to a target of their own (reading it out) or restore one of
// theirs over it. The daemon sets both from the cluster's state.
type Policy struct {
	// BackupTarget returns, of the cluster's backup targets (the
	// backup-target setting and every BackupTarget), the one location
	// names, with the data of the Secret its credential names: "" when
	// location is inside none of them, ErrNoBackupTarget when none is
	// configured at all. When set, BackupCreate and Restore accept only
	// locations inside a configured target (PermissionDenied otherwise,
	// FailedPrecondition when none is configured) and open it with its
	// credential, never one the caller sends.
	BackupTarget func(ctx context.Context, location string) (target string, cred map[string]string, err error)
	// RestoreAllowed, when set, says whether volume is being restored
	// from backupURL; a Restore it refuses is FailedPrecondition. The
	// engine refuses a restore into a volume with a frontend or with
	// snapshots in any case.
	RestoreAllowed func(ctx context.Context, volume, backupURL string) error
}

// SetPolicy sets the checks of BackupCreate and Restore; none by default,
// for tests and clients of a lone engine.
func (s *Server) SetPolicy(p Policy) {
	s.mu.Lock()
	s.policy = p
	s.mu.Unlock()
}

func (s *Server) getPolicy() Policy {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.policy
}

// normalTarget is backupstore.NormalTarget.
func normalTarget(target string) (string, error) { return backupstore.NormalTarget(target) }

// ErrNoBackupTarget is what Policy.BackupTarget returns when no backup
// target is configured.
var ErrNoBackupTarget = errors.New("no backup target is configured (the backup-target setting is empty and no other BackupTarget has a URL)")

// checkTarget returns the credential to open target with, or why target
// may not be used.
func (p Policy) checkTarget(ctx context.Context, target string, cred map[string]string) (map[string]string, error) {
	if p.BackupTarget == nil {
		return cred, nil
	}
	got, err := normalTarget(target)
	if err != nil {
		return nil, status.Errorf(codes.PermissionDenied, "backup location %q is not a URL: only a configured backup target (the backup-target setting or a BackupTarget) may be used", target)
	}
	configured, configuredCred, err := p.BackupTarget(ctx, got)
	if errors.Is(err, ErrNoBackupTarget) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "the backup targets cannot be read: %v", err)
	}
	if configured == "" {
		return nil, status.Errorf(codes.PermissionDenied, "backup location %q: only a configured backup target (the backup-target setting or a BackupTarget) may be used", target)
	}
	return configuredCred, nil
}

// checkLabels bounds a backup's labels as a snapshot's.
func checkLabels(labels map[string]string) error {
	if err := replica.CheckLabels(labels); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// checkRestore says whether a restore of backupURL into volume may go on.
func (p Policy) checkRestore(ctx context.Context, volume, backupURL string) error {
	if p.RestoreAllowed == nil {
		return nil
	}
	if err := p.RestoreAllowed(ctx, volume, backupURL); err != nil {
		return status.Error(codes.FailedPrecondition, fmt.Sprintf("restore into volume %s: %v", volume, err))
	}
	return nil
}
