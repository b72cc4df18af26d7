package volumeengine

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Expand grows the volume to size bytes on every RW replica at once,
// while I/O waits; the new space reads as zeros. A size below the
// volume's is refused (ErrInvalid, naming size), the same size is a
// no-op. Each replica grows crash-safely (replica.Grow); a replica that
// fails to grow is dropped as an I/O failure is, so the replicas that
// carry on agree on the new size, and the dropped one, behind them by
// its epoch, is never RW again. A crash between two replicas' growth
// leaves replicas of two sizes and the same epoch: the next engine grows
// the smaller ones (New), as no write past the old end was acknowledged.
func (e *Engine) Expand(size int64) error {
	e.called("Expand")
	if size <= 0 || size%replica.BlockSize != 0 {
		return fmt.Errorf("%w: size %d: must be a positive multiple of %d bytes", ErrInvalid, size, replica.BlockSize)
	}
	if url := e.restoring(); url != "" {
		return fmt.Errorf("%w: volume %s is being restored from %s: it grows once the restore ends", ErrPrecondition, e.name, url)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	current := e.size.Load()
	if size < current {
		return fmt.Errorf("%w: size %d is below the volume's %d bytes: a volume never shrinks", ErrInvalid, size, current)
	}
	if size == current {
		return nil
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	members := e.healthy()
	if len(members) == 0 {
		return ErrNoHealthyReplica
	}
	if err := refuseRemote("grow", members); err != nil {
		return fmt.Errorf("volume %s: grow to %d bytes: %w", e.name, size, err)
	}
	if err := e.refuseWhileRebuilding(fmt.Sprintf("grow to %d bytes", size)); err != nil {
		return err
	}
	done := 0
	for _, m := range members {
		if err := m.r.Grow(size); err != nil {
			if errors.Is(err, replica.ErrFenced) {
				e.fence(m, err)
				return e.Fenced()
			}
			if done == 0 {
				// Nothing grew: every replica keeps the old size.
				return fmt.Errorf("volume %s: grow replica %s to %d bytes: %w", e.name, m.name, size, err)
			}
			e.fail(m, fmt.Errorf("grow to %d bytes: %w", size, err))
			continue
		}
		done++
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	e.size.Store(size)
	e.log.WithFields(logrus.Fields{"from": current, "to": size, "replicas": done}).Info("Expanded volume")
	e.notify()
	return nil
}

// evenSizes brings the RW replicas to one size, the largest among them:
// replicas of one epoch and different sizes are what a crash in the
// middle of Expand leaves, and the smaller ones missed only the growth
// (no write past their end was acknowledged). A replica that cannot grow
// is dropped. Called by New, before the engine is shared.
func (e *Engine) evenSizes() error {
	var size int64
	for _, m := range e.healthy() {
		size = max(size, m.r.Size())
	}
	for _, m := range e.healthy() {
		if m.r.Size() == size {
			continue
		}
		from := m.r.Size()
		if err := refuseRemote("grow", []*member{m}); err != nil {
			return fmt.Errorf("volume %s: replica %s has %d bytes, another %d: %w", e.name, m.name, from, size, err)
		}
		if err := m.r.Grow(size); err != nil {
			if errors.Is(err, replica.ErrShrink) {
				return err
			}
			e.fail(m, fmt.Errorf("grow to the other replicas' %d bytes: %w", size, err))
			continue
		}
		e.log.WithFields(logrus.Fields{"replica": m.name, "from": from, "to": size}).Warn("Grew a replica to its volume's size: an expansion was cut short before it reached this replica")
	}
	e.size.Store(size)
	return nil
}
