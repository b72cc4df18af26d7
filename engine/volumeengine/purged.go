package volumeengine

import "sync"

// purgedLimit bounds the record of purged snapshot names. A snapshot's
// object is reconciled within seconds of its purge, so the record only has
// to outlast the queue, not the volume's life.
const purgedLimit = 4096

// purgedNames remembers the names of the snapshots the engine purged most
// recently, oldest first out. A watcher that sees a snapshot disappear
// without ever having seen it marked removed (a delete and a purge that
// landed between two of its reads) asks it whether the snapshot was
// purged or vanished.
type purgedNames struct {
	mu    sync.Mutex
	set   map[string]struct{}
	order []string
}

func (p *purgedNames) add(names []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil {
		p.set = map[string]struct{}{}
	}
	for _, n := range names {
		if _, ok := p.set[n]; ok {
			continue
		}
		p.set[n] = struct{}{}
		p.order = append(p.order, n)
	}
	for len(p.order) > purgedLimit {
		delete(p.set, p.order[0])
		p.order = p.order[1:]
	}
}

// forget drops a name that is in use again (a new snapshot of the name).
func (p *purgedNames) forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.set[name]; !ok {
		return
	}
	delete(p.set, name)
	for i, n := range p.order {
		if n == name {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
}

func (p *purgedNames) has(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.set[name]
	return ok
}

// WasPurged tells whether this engine purged a snapshot of that name
// recently (since it started, among its last 4,096 purged snapshots) and
// none of the name was taken since. It reads no replica.
func (e *Engine) WasPurged(name string) bool {
	return e.purged.has(name)
}
