package rpc

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Policy is what the engine service checks on the calls that move a
// volume's data in or out: the caller names a backup target and sends a
// credential, so without it anyone who reaches the service could back a
// volume up to a target of their own (reading it out) or restore one of
// theirs over it. The daemon sets both from the cluster's state.
type Policy struct {
	// BackupTarget returns the backup-target setting and the data of the
	// Secret its credential setting names. When set, BackupCreate and
	// Restore accept only locations inside that target (PermissionDenied
	// otherwise, FailedPrecondition when none is configured) and open it
	// with that credential, never one the caller sends.
	BackupTarget func(ctx context.Context) (target string, cred map[string]string, err error)
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

// normalTarget is a target URL with its path cleaned and no trailing
// slash, so file:///b/ and file:///b/x/.. compare equal.
func normalTarget(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	u.RawQuery, u.Fragment = "", ""
	if u.Path != "" {
		u.Path = strings.TrimSuffix(path.Clean(u.Path), "/")
	}
	u.RawPath = ""
	return u.String(), nil
}

// checkTarget returns the credential to open target with, or why target
// may not be used.
func (p Policy) checkTarget(ctx context.Context, target string, cred map[string]string) (map[string]string, error) {
	if p.BackupTarget == nil {
		return cred, nil
	}
	configured, configuredCred, err := p.BackupTarget(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "the backup-target setting cannot be read: %v", err)
	}
	if configured == "" {
		return nil, status.Error(codes.FailedPrecondition, "no backup target is configured (the backup-target setting is empty)")
	}
	want, err := normalTarget(configured)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "the backup-target setting %q is not a URL: %v", configured, err)
	}
	got, err := normalTarget(target)
	if err != nil || got != want {
		return nil, status.Errorf(codes.PermissionDenied, "backup location %q: only the configured backup-target %s may be used", target, configured)
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
