package volume

import (
	"sync"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// engineMirrors remembers, per volume, which engine generation the Engine
// object's status was last written from, so a volume sync with nothing new
// (an informer resync, a change of the volume's own status) does not read
// the engine again. The record is only a shortcut: a restart, another
// engine instance, a moved generation or any other write to the Engine
// object (its resource version) makes the next sync read the engine.
//
// It also paces the mirrors an engine's changes ask for (see wait).
type engineMirrors struct {
	mu   sync.Mutex
	seen map[string]engineMirror
	// read is when each volume's engine was last read for a mirror.
	read map[string]time.Time
}

// engineMirrorPace is the least time between two mirrors of one engine
// that its changes ask for. A burst of changes (snapshots taken one after
// another, a backup's progress) is mirrored at most once per pace, in one
// write of the Engine status that also spares the writes of every
// intermediate state to the Snapshot objects (a snapshot whose child
// comes within the pace is first written with that child). A change after
// a quiet pace is mirrored at once. Longhorn itself reads its engines
// every 5 seconds.
const engineMirrorPace = 5 * time.Second

// wait is how long a change of volume's engine waits before its mirror:
// none when the last read is a pace old, else the rest of the pace. The
// workqueue's delay keeps one pending sync per volume, so changes within
// the pace fold into it. It is wall time, as the workqueue's delays are.
func (m *engineMirrors) wait(volume string, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.read[volume]
	if !ok {
		return 0
	}
	return max(0, min(engineMirrorPace, last.Add(engineMirrorPace).Sub(now)))
}

// readAt notes that volume's engine was read for a mirror at t.
func (m *engineMirrors) readAt(volume string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read[volume] = t
}

type engineMirror struct {
	engine          *volumeengine.Engine
	generation      uint64
	resourceVersion string
}

// current tells whether obj's status already holds what engine reports
// at generation gen.
func (m *engineMirrors) current(volume string, engine *volumeengine.Engine, gen uint64, obj *longhorn.Engine) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.seen[volume]
	return ok && s.engine == engine && s.generation == gen && s.resourceVersion == obj.ResourceVersion
}

// record notes that the Engine object at resourceVersion holds what engine
// reported at generation gen.
func (m *engineMirrors) record(volume string, engine *volumeengine.Engine, gen uint64, resourceVersion string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[volume] = engineMirror{engine: engine, generation: gen, resourceVersion: resourceVersion}
}

// forget drops the record of a volume whose engine stopped.
func (m *engineMirrors) forget(volume string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, volume)
	delete(m.read, volume)
}
