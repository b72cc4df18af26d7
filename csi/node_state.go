package csi

import (
	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
)

// stagedVolume is what NodeStageVolume made for a volume on this node
// (see package nodestate, which the manager on the node also reads).
type stagedVolume = nodestate.Volume

// volumeIDPattern are the volume IDs the Node service accepts.
var volumeIDPattern = nodestate.IDPattern

func (d *Driver) stateDir() string { return nodestate.Dir(d.opts.StateDir) }

// loadState reads a volume's state; nil, nil when it has none.
func (d *Driver) loadState(volumeID string) (*stagedVolume, error) {
	return nodestate.Load(d.stateDir(), volumeID)
}

// saveState writes a volume's state atomically.
func (d *Driver) saveState(st *stagedVolume) error { return nodestate.Save(d.stateDir(), st) }

func (d *Driver) removeState(volumeID string) error {
	return nodestate.Remove(d.stateDir(), volumeID)
}
