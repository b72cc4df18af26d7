package volumeengine

// A replica that fails: what New is told of replicas that failed before,
// why a replica is ERR, and how an I/O failure drops one without letting
// any later engine take it for current.

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Option changes how New starts an engine.
type Option func(*options)

type options struct {
	behind  map[string]string
	keptOut map[string]uint64
	// owner, remotes (name to address), tls and the timeouts: remote.go.
	owner          *owner
	remotes        map[string]string
	tls            *tls.Config
	timeout        time.Duration
	controlTimeout time.Duration
}

// KeptOut names a replica of the volume that the engine does not open (it
// failed) and its epoch: a replica the engine opens whose epoch is below
// it is behind it, and not RW.
func KeptOut(name string, epoch uint64) Option {
	return func(o *options) {
		if o.keptOut == nil {
			o.keptOut = map[string]uint64{}
		}
		o.keptOut[name] = epoch
	}
}

// Behind starts replica name as ERR, for the reason why: its data is known
// to be behind the others' (a replica created empty beside replicas that
// hold data).
func Behind(name, why string) Option {
	return func(o *options) {
		if o.behind == nil {
			o.behind = map[string]string{}
		}
		o.behind[name] = why
	}
}

// Failure says why a replica is ERR.
type Failure struct {
	// Behind: the replica's data was behind the others' when the engine
	// started (it failed under an earlier engine, or was created empty
	// beside data); otherwise an I/O of it failed in this engine.
	Behind bool
	Why    string
}

// ReplicaFailures says, for each ERR replica, why it is not used. It is
// not a call of the control API.
func (e *Engine) ReplicaFailures() map[string]Failure {
	e.failMu.Lock()
	defer e.failMu.Unlock()
	out := map[string]Failure{}
	for _, m := range e.replicas {
		if m.failed.Load() {
			out[m.name] = Failure{Behind: m.behind, Why: m.err}
		}
	}
	return out
}

// fail drops a replica whose I/O failed. The replicas that carry on first
// get a higher epoch, durably, so that no later engine takes the failed
// one for current; only then is it marked ERR, and writes acknowledged
// without it. A replica that cannot take the new epoch fails too. A
// replica that refused the engine for a newer one (replica.ErrFenced),
// here or as it was given the new epoch, fences the engine instead, and
// nothing is marked: a fenced engine changes nothing.
func (e *Engine) fail(m *member, err error) {
	if errors.Is(err, replica.ErrFenced) {
		e.fence(m, err)
		return
	}
	e.failMu.Lock()
	defer e.failMu.Unlock()
	if m.failed.Load() || e.Fenced() != nil {
		return
	}
	log := e.log.WithFields(logrus.Fields{"replica": m.name})
	next := e.epoch + 1
	lost := map[*member]error{}
	carry := 0
	for _, o := range e.replicas {
		// A WO replica is being rebuilt: its epoch is not raised, as it
		// holds no current data yet.
		if o == m || o.failed.Load() || o.wo.Load() {
			continue
		}
		if serr := o.r.SetEpoch(next); serr != nil {
			if errors.Is(serr, replica.ErrFenced) {
				e.fence(o, serr)
				return
			}
			lost[o] = serr
			e.log.WithError(serr).WithFields(logrus.Fields{"replica": o.name, "failed": m.name}).Error("Replica failed: it could not record that replica " + m.name + " failed")
			continue
		}
		carry++
	}
	e.epoch = next
	m.err = err.Error()
	m.failed.Store(true)
	for o, serr := range lost {
		o.err = "recording that replica " + m.name + " failed: " + serr.Error()
		o.failed.Store(true)
	}
	log.WithError(err).WithFields(logrus.Fields{"epoch": next, "healthy": carry}).Error("Replica failed; the volume carries on without it until it is rebuilt")
	e.notify()
}
