package backingimage

import (
	"errors"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
)

// follower is what a server controller keeps per running server to
// follow it: a data source's poll, a manager's Watch stream.
type follower interface {
	// address is the address of the server followed.
	address() string
	// end stops following and releases what the follower holds open.
	end()
}

// followers holds one follower per object name. The data source and the
// manager controllers each keep one.
type followers[F follower] struct {
	mu sync.Mutex
	m  map[string]F
}

// ensure returns the follower of name's server at addr, starting one with
// start (and ending the old one) unless one already follows that address.
func (fs *followers[F]) ensure(name, addr string, start func() (F, error)) (F, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	old, ok := fs.m[name]
	if ok && old.address() == addr {
		return old, nil
	}
	if ok {
		old.end()
		delete(fs.m, name)
	}
	f, err := start()
	if err != nil {
		return f, err
	}
	if fs.m == nil {
		fs.m = map[string]F{}
	}
	fs.m[name] = f
	return f, nil
}

// stop ends the follower of name, if any.
func (fs *followers[F]) stop(name string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.m[name]; ok {
		f.end()
		delete(fs.m, name)
	}
}

// stopAll ends every follower (the controller is stopping).
func (fs *followers[F]) stopAll() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for name, f := range fs.m {
		f.end()
		delete(fs.m, name)
	}
}

// stopServer stops the server of serverKey unless it was never started;
// log names the object.
func stopServer(r runner.ServerRunner, log *logrus.Entry, serverKey, why string) {
	if _, err := r.Address(serverKey); errors.Is(err, runner.ErrServerNotStarted) {
		return
	}
	log.WithField("reason", why).Info("Stopping the server")
	r.Stop(serverKey)
}
