package instancemanager

// The node's replicas served to other nodes' engines over the replica
// protocol (docs/design-data-plane.md, "Replicas on other nodes"): the Set
// is the manager's instance.ReplicaServer, as one instance manager's
// client is with the process runner.

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
)

var _ instance.ReplicaServer = (*Set)(nil)

// ServeReplica serves rd where it is served already, else in the
// instance manager of the manager's image, as new engines start there:
// the newest one after an upgrade. A replica an older instance manager
// serves stays there until it is stopped (it holds the folder's lock,
// which no second process takes), and is opened in the new one when it is
// next served. An older one that does not answer is passed over: if it
// still holds the replica, the lock refuses the new one's open, and the
// serve is tried again.
func (s *Set) ServeReplica(volume, volumeUID string, rd instance.ReplicaDir, size int64) (instance.ServedReplica, error) {
	m := s.current
	for _, o := range s.members()[1:] {
		list, _, err := o.Client.ListReplicas()
		if err != nil {
			if !errors.Is(err, instancemanager.ErrUnimplemented) {
				s.log.WithError(err).WithFields(logrus.Fields{"instanceManager": o.Name, "replica": rd.Name}).
					Warn("An instance manager of another image does not say what it serves; the replica is served in the manager's image's")
			}
			continue
		}
		if served(list, rd.Name) {
			m = o
			break
		}
	}
	sr, err := m.Client.ServeReplica(volume, volumeUID, rd, size)
	if err != nil {
		return instance.ServedReplica{}, fmt.Errorf("instance manager %s (image %s): %w", m.Name, m.Image, err)
	}
	return sr, nil
}

// StopReplica stops serving the replica in every instance manager of the
// node: it is served in one at most, and a stop where it is not served is
// done. One of an older version without the call serves nothing.
func (s *Set) StopReplica(name string) error {
	var errs []error
	for _, m := range s.members() {
		if err := m.Client.StopReplica(name); err != nil && !errors.Is(err, instancemanager.ErrUnimplemented) {
			errs = append(errs, fmt.Errorf("instance manager %s (image %s): %w", m.Name, m.Image, err))
		}
	}
	return errors.Join(errs...)
}

// ListReplicas is what every instance manager of the node serves, and the
// current one's address, where replicas are served from now on. It fails
// when one cannot say (the caller then stops what is not to be served,
// wherever it is, rather than trust a partial list).
func (s *Set) ListReplicas() ([]instance.ServedReplica, string, error) {
	var all []instance.ServedReplica
	address := ""
	for i, m := range s.members() {
		list, addr, err := m.Client.ListReplicas()
		if errors.Is(err, instancemanager.ErrUnimplemented) && i > 0 {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("instance manager %s (image %s): %w", m.Name, m.Image, err)
		}
		if i == 0 {
			address = addr
		}
		all = append(all, list...)
	}
	return all, address, nil
}

// servesAny says whether m serves a replica now, or may (it does not
// answer): Retire keeps such an instance manager, as another node's
// engine reads and writes through it.
func servesAny(m *member) bool {
	list, _, err := m.Client.ListReplicas()
	if errors.Is(err, instancemanager.ErrUnimplemented) {
		return false
	}
	return err != nil || len(list) > 0
}

func served(list []instance.ServedReplica, name string) bool {
	for _, sr := range list {
		if sr.Name == name {
			return true
		}
	}
	return false
}
