package volume

import (
	"sync"

	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// engineMirrors remembers, per volume, which engine generation the Engine
// object's status was last written from, so a volume sync with nothing new
// (an informer resync, a change of the volume's own status) does not read
// the engine again. The record is only a shortcut: a restart, another
// engine instance, a moved generation or any other write to the Engine
// object (its resource version) makes the next sync read the engine.
type engineMirrors struct {
	mu   sync.Mutex
	seen map[string]engineMirror
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
}
