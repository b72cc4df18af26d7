package snapshot

import (
	"sync"

	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// takenSnapshots remembers which engine took the snapshot of each
// Snapshot object until the Engine status (the volume controller's mirror,
// paced) shows it, so the syncs in between do not ask the engine again.
// A restart forgets it: the engine then refuses a second snapshot of the
// name.
type takenSnapshots struct {
	mu sync.Mutex
	by map[string]*volumeengine.Engine
}

func (t *takenSnapshots) record(name string, e *volumeengine.Engine) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]*volumeengine.Engine{}
	}
	t.by[name] = e
}

// tookIt tells whether engine e took the snapshot name.
func (t *takenSnapshots) tookIt(name string, e *volumeengine.Engine) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.by[name] == e
}

func (t *takenSnapshots) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.by, name)
}
