package volumeengine

// A rebuild's copy: the layers under the rebuild's snapshot, from a
// healthy replica to the one being rebuilt, their data extents only, in
// chunks checked by SHA-256 on both sides; then the chain's metadata,
// last; then the comparison of the two chains and the switch to RW.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

const (
	// RebuildChunk is the most data one read and write of a rebuild
	// carries, each checked by its SHA-256.
	RebuildChunk = 2 << 20
	// rebuildInFlight bounds the chunks a rebuild has in flight, so its
	// memory (rebuildInFlight * RebuildChunk) does not follow the volume.
	rebuildInFlight = 4
	// rebuildExtents is how many extents a rebuild lists at once.
	rebuildExtents = 1024
)

// remoteLayers is a remote replica's layers, held by its server for the
// engine's connection.
type remoteLayers struct {
	c     *replicaproto.Client
	chain replica.ChainMeta
}

func (l *remoteLayers) Chain() replica.ChainMeta { return l.chain }
func (l *remoteLayers) Extents(name string, from int64, max int) ([]replica.Extent, int64, error) {
	return l.c.LayerExtents(name, from, max)
}
func (l *remoteLayers) ReadLayer(name string, p []byte, off int64) ([32]byte, error) {
	return l.c.ReadLayer(name, p, off)
}
func (l *remoteLayers) Close() error { return l.c.CloseLayers() }

func (r *remoteReplica) BeginRebuild() error { return r.carried(r.c.BeginRebuild()) }
func (r *remoteReplica) WriteLayer(name string, p []byte, off int64, sum [32]byte) ([32]byte, error) {
	return r.c.WriteLayer(name, p, off, sum)
}
func (r *remoteReplica) InstallChain(c replica.ChainMeta) error { return r.c.InstallChain(c) }

// Rebuilding tells whether the replica said, when opened, that it is
// being rebuilt.
func (r *remoteReplica) Rebuilding() bool { return r.c.Opened().Rebuilding }

var _ RebuildTarget = (*remoteReplica)(nil)

// openLayers holds src's layers for a rebuild at snapshot snap.
func openLayers(src *member, snap string) (layerSource, error) {
	switch r := src.r.(type) {
	case localLayers:
		return r.OpenLayers(snap)
	case *remoteReplica:
		chain, err := r.c.OpenLayers(snap)
		if err != nil {
			return nil, err
		}
		return &remoteLayers{c: r.c, chain: chain}, nil
	}
	return nil, fmt.Errorf("replica %s: its layers cannot be read", src.name)
}

// runRebuild copies, verifies and promotes m, and ends its rebuild. A
// panic in it is the rebuild's error, logged with its stack.
func (e *Engine) runRebuild(ctx context.Context, log *logrus.Entry, m, src *member, snap string) {
	start := time.Now()
	err := func() (err error) {
		defer panics.Recover(log, &err)
		if err := e.copyLayers(ctx, log, m, src, snap); err != nil {
			return err
		}
		return e.promote(m)
	}()
	if err != nil {
		if errors.Is(err, replica.ErrFenced) {
			e.fence(m, err)
		}
		log.WithError(err).Error("Rebuild failed: the replica is ERR")
		e.endRebuild(m, err)
		return
	}
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("Rebuilt replica: it is RW")
	e.endRebuild(m, nil)
}

// copyLayers copies every layer src held at the rebuild's snapshot into
// m, then installs the chain's metadata and compares the chains.
//
// The rebuild's snapshot's own layer on m already holds the writes since
// m joined; copying the source's whole layer over it is right because the
// source took the same writes, in the same order, before the snapshot
// froze both (m took each after the RW replicas did, under the engine's
// lock that the snapshot takes exclusively), so the source's layer holds
// everything m's does and more. Layers above it (the head, snapshots taken
// since) are not copied: m took all their writes itself.
func (e *Engine) copyLayers(ctx context.Context, log *logrus.Entry, m, src *member, snap string) error {
	target := m.r.(RebuildTarget)
	layers, err := openLayers(src, snap)
	if err != nil {
		return fmt.Errorf("hold the layers of replica %s: %w", src.name, err)
	}
	defer layers.Close()
	chain := layers.Chain()
	var total int64
	for _, s := range chain.Snapshots {
		total += s.DataSize
	}
	log = log.WithFields(logrus.Fields{"snapshots": len(chain.Snapshots), "bytes": total})
	log.Info("Rebuild: copying the layers")
	var copied, chunks atomic.Int64
	lastLogged := atomic.Int64{}
	bufs := make(chan []byte, rebuildInFlight)
	for range rebuildInFlight {
		bufs <- make([]byte, RebuildChunk)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rebuildInFlight)
	chunk := func(name string, off, n int64) error {
		if !m.rebuilding() {
			return fmt.Errorf("replica %s failed while it was rebuilt", m.name)
		}
		buf := <-bufs
		defer func() { bufs <- buf }()
		p := buf[:n]
		sum, err := layers.ReadLayer(name, p, off)
		if err != nil {
			return fmt.Errorf("read layer %s at %d from replica %s: %w", name, off, src.name, err)
		}
		got, err := target.WriteLayer(name, p, off, sum)
		if err != nil {
			return fmt.Errorf("write layer %s at %d: %w", name, off, err)
		}
		if got != sum {
			return fmt.Errorf("layer %s at %d: the rebuilt replica holds other data than replica %s (SHA-256 %x, not %x)", name, off, src.name, got[:8], sum[:8])
		}
		chunks.Add(1)
		done := copied.Add(n)
		pct := int(min(99, done*100/max(total, 1)))
		e.setRebuildStatus(m.name, func(s *RebuildStatus) { s.Progress = pct })
		if step := int64(pct / 10); step > lastLogged.Load() && lastLogged.CompareAndSwap(lastLogged.Load(), step) {
			log.WithFields(logrus.Fields{"progress": pct, "copied": done}).Info("Rebuild: copying")
		}
		return nil
	}
walk:
	for _, s := range chain.Snapshots {
		for from := int64(0); from >= 0; {
			exts, next, err := layers.Extents(s.Name, from, rebuildExtents)
			if err != nil {
				g.Go(func() error { return fmt.Errorf("extents of layer %s of replica %s: %w", s.Name, src.name, err) })
				break walk
			}
			for _, x := range exts {
				for off := x.Start; off < x.End; off += RebuildChunk {
					if gctx.Err() != nil {
						break walk
					}
					name, at, n := s.Name, off, min(RebuildChunk, x.End-off)
					g.Go(func() error { return chunk(name, at, n) })
				}
			}
			from = next
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return errors.New("the engine stopped")
	}
	// Last: until the chain's metadata is installed the replica is marked
	// as being rebuilt, and no engine takes it for complete.
	if err := target.InstallChain(chain); err != nil {
		return fmt.Errorf("install the chain: %w", err)
	}
	if err := verifyChain(m.r, chain); err != nil {
		return err
	}
	log.WithField("chunks", chunks.Load()).Info("Rebuild: the layers are copied, each chunk's SHA-256 checked on both sides, and the chains agree")
	return nil
}

// verifyChain compares m's chain with the one copied: the same snapshots,
// IDs, parents, marks, labels and data in each layer.
func verifyChain(r Replica, chain replica.ChainMeta) error {
	list, err := r.Snapshots()
	if err != nil {
		return fmt.Errorf("list the rebuilt chain: %w", err)
	}
	have := make(map[string]replica.Snapshot, len(list))
	for _, s := range list {
		have[s.Name] = s
	}
	for _, s := range chain.Snapshots {
		t, ok := have[s.Name]
		switch {
		case !ok:
			return fmt.Errorf("the rebuilt chain has no snapshot %s", s.Name)
		case t.ID != s.ID || t.Parent != s.Parent || t.Removed != s.Removed || t.UserCreated != s.UserCreated || t.Created != s.Created || !maps.Equal(t.Labels, s.Labels):
			return fmt.Errorf("the rebuilt chain's snapshot %s is not the source's: %+v, not %+v", s.Name, t, s)
		case t.Size != s.DataSize:
			return fmt.Errorf("the rebuilt chain's snapshot %s holds %d bytes of data, the source's %d", s.Name, t.Size, s.DataSize)
		}
	}
	return nil
}

// promote makes m RW with the volume's epoch, I/O held for that instant.
func (e *Engine) promote(m *member) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.Fenced(); err != nil {
		return err
	}
	if e.closed.Load() {
		return errors.New("the engine stopped")
	}
	if !m.rebuilding() {
		return fmt.Errorf("replica %s failed while it was rebuilt: %s", m.name, m.err)
	}
	if m.r.Size() != e.Size() {
		return fmt.Errorf("replica %s is of %d bytes, the volume of %d", m.name, m.r.Size(), e.Size())
	}
	e.failMu.Lock()
	defer e.failMu.Unlock()
	if err := m.r.SetEpoch(e.epoch); err != nil {
		return fmt.Errorf("set the epoch %d: %w", e.epoch, err)
	}
	m.wo.Store(false)
	return nil
}
