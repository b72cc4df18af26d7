package instance

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// RebuildReplica is a replica to rebuild into a running engine: one of
// the engine's own process, in folder Dir (created there, empty, when it
// holds none), or one another process serves at Address (its replica
// address), opened with the engine's term. Exactly one of Dir and Address
// is set.
type RebuildReplica struct {
	Name    string
	Dir     string
	Address string
}

// Rebuild rebuilds rr into e from healthy replica from ("": the engine
// picks, its own process's first), as volumeengine.Engine.StartRebuild
// does: it returns once rr has joined as WO; e's Status (Rebuilds)
// follows the copy.
func Rebuild(e *volumeengine.Engine, rr RebuildReplica, from string) error {
	if rr.Name == "" || (rr.Dir == "") == (rr.Address == "") {
		return fmt.Errorf("%w: rebuild: a replica is named, with its folder or its address, not both (%q, %q, %q)", volumeengine.ErrInvalid, rr.Name, rr.Dir, rr.Address)
	}
	if rr.Address != "" {
		r, err := e.OpenRemoteReplica(rr.Name, rr.Address)
		if err != nil {
			return err
		}
		return e.StartRebuild(rr.Name, r, from)
	}
	var r *replica.Replica
	var err error
	if _, serr := os.Stat(filepath.Join(rr.Dir, "volume.meta")); serr != nil {
		r, err = replica.Create(rr.Dir, e.Size())
	} else {
		r, err = replica.Open(rr.Dir)
	}
	if err != nil {
		return fmt.Errorf("volume %s: rebuild replica %s in %s: %w", e.Name(), rr.Name, rr.Dir, err)
	}
	return e.StartRebuild(rr.Name, r, from)
}

// StartRebuild is Rebuild on the in-process engine.
func (e localEngine) StartRebuild(rr RebuildReplica, from string) error {
	return Rebuild(e.Engine, rr, from)
}
