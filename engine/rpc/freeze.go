package rpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/internal/fsfreeze"
)

// Freezer runs a snapshot of a volume with its mounted filesystem frozen
// when the volume's policy asks for it (fsfreeze.Guard).
type Freezer interface {
	Around(ctx context.Context, volume string, snapshot func() error) error
}

// SetFreezer says how this node freezes a volume's filesystem for its
// snapshots; none by default (snapshots are crash-consistent).
func (s *Server) SetFreezer(f Freezer) {
	s.mu.Lock()
	s.freezer = f
	s.mu.Unlock()
}

// frozen runs snapshot under f, when there is one; a filesystem that
// cannot be frozen fails the snapshot as FailedPrecondition, saying why.
func frozen(ctx context.Context, f Freezer, volume string, snapshot func() error) error {
	if f == nil {
		return snapshot()
	}
	err := f.Around(ctx, volume, snapshot)
	if errors.Is(err, fsfreeze.ErrFreeze) {
		return status.Errorf(codes.FailedPrecondition, "snapshot of volume %s: %v", volume, err)
	}
	return err
}
