package volumeengine

import (
	"fmt"
)

// Fenced is why the engine serves no more: nil, or the refusal of a
// replica that a newer engine took (replica.ErrFenced, wrapped). From
// then on every I/O and every change fails with it, and nothing more is
// changed for it: no replica is marked failed and no epoch raised, as the
// engine no longer owns what it would change (docs/design-data-plane.md,
// "Two writers never happen: the term"). Not a call of the control API.
func (e *Engine) Fenced() error {
	if p := e.fenced.Load(); p != nil {
		return *p
	}
	return nil
}

// fence records that member m refused the engine with err, a
// replica.ErrFenced; the first refusal is the one kept.
func (e *Engine) fence(m *member, err error) {
	ferr := fmt.Errorf("volume %s: replica %s refused this engine, which serves no more: %w", e.name, m.name, err)
	if e.fenced.CompareAndSwap(nil, &ferr) {
		e.log.WithError(err).WithField("replica", m.name).Error("A newer engine owns the volume's replicas: this engine is fenced and serves no more")
		e.notify()
	}
}
