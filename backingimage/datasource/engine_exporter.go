package datasource

import (
	"context"
	"fmt"
	"time"

	"github.com/cadence-storage/longhorn-manager/engineapi"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// EngineExporter is the VolumeExporter that reads snapshots through the
// engine service of the node that runs the volume's engine.
type EngineExporter struct {
	// Address is the engine service's host:port.
	Address string
	// Timeout bounds each call (a read of one range);
	// engineapi.DefaultTimeout when zero.
	Timeout time.Duration
	// TLS is what the engine service is called with.
	TLS *mtls.Identity
}

// OpenSnapshot checks that the volume's engine has the snapshot, not
// deleted, and returns a reader of it; each ReadAt is one SnapshotRead
// call, which keeps the engine holding the snapshot.
func (x EngineExporter) OpenSnapshot(ctx context.Context, volume, snapshot string) (SnapshotReader, error) {
	c, err := engineapi.NewGRPCClient(x.Address, volume, x.Timeout, x.TLS)
	if err != nil {
		return nil, err
	}
	v, err := c.VolumeGet(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	s, err := c.SnapshotGet(ctx, snapshot)
	if err != nil {
		c.Close()
		return nil, err
	}
	if s.Removed {
		c.Close()
		return nil, fmt.Errorf("snapshot %s of volume %s is deleted (marked removed)", snapshot, volume)
	}
	return &engineSnapshot{ctx: ctx, client: c, snapshot: snapshot, size: v.Size}, nil
}

// engineSnapshot reads one snapshot through the engine.
type engineSnapshot struct {
	ctx      context.Context
	client   *engineapi.GRPCClient
	snapshot string
	size     int64
}

func (s *engineSnapshot) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := s.client.SnapshotRead(s.ctx, s.snapshot, p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *engineSnapshot) Size() int64 { return s.size }

func (s *engineSnapshot) Close() error { return s.client.Close() }
