package volume

import (
	"sync"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
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
	// read is when each volume's engine was last read for a mirror that
	// changed its Engine's status.
	read map[string]time.Time
	// listed is when each volume's Engine status was last written for a
	// change of its snapshot list alone.
	listed map[string]time.Time
	// finished is, per volume, the engine's count of ended backups
	// (instance.Engine.BackupsFinished) when its Engine status was last
	// written from it.
	finished map[string]uint64
}

func newEngineMirrors() engineMirrors {
	return engineMirrors{seen: map[string]engineMirror{}, read: map[string]time.Time{}, listed: map[string]time.Time{}, finished: map[string]uint64{}}
}

// engineMirrorPace is the least time between two mirrors of one engine
// that its changes ask for. A burst of changes (snapshots taken one after
// another, a backup's progress) is mirrored at most once per pace, in one
// write of the Engine status that also spares the writes of every
// intermediate state to the Snapshot objects (a snapshot whose child
// comes within the pace is first written with that child). A change after
// a quiet pace is mirrored once the changes that come with it are in
// (engineMirrorGather). Longhorn itself reads its engines every 5 seconds.
const engineMirrorPace = 5 * time.Second

// engineListPace is the least time between a write of an Engine status's
// snapshot list and a write that changes nothing but that list. A change
// of the list alone a pace after the list was last written is mirrored as
// any other (engineMirrorPace); one within this pace waits until it ends,
// unless another change of the engine (its state, replicas, a purge or a
// backup) is mirrored first, with the list as it then is, which starts the
// pace again. The Snapshot objects do not wait for the list (their
// controller reads the engine itself): it is there for those who read the
// Engine object. A volume taking snapshots one after another would
// otherwise have its Engine status, which grows with its snapshots,
// written once per snapshot: at 15 snapshots such a write costs the
// control plane 16 ms of processor time, a Snapshot's create 3 ms
// (BenchmarkControlPlaneCostPerWrite).
const engineListPace = 30 * time.Second

// engineMirrorGather is how long a change after a quiet pace waits for the
// changes that come with it. A manager's start takes the snapshots made
// while it was down one after another, as does a job over a volume's
// snapshots: one mirror at the end of the burst shows them all, where one
// at its start would leave the rest to wait out the pace.
const engineMirrorGather = 250 * time.Millisecond

// wait is how long a change of volume's engine waits before its mirror:
// the gathering window when the last read is a pace old, else the rest of
// the pace. The workqueue's delay keeps one pending sync per volume, so
// changes within the wait fold into it. It is wall time, as the
// workqueue's delays are.
func (m *engineMirrors) wait(volume string, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.read[volume]
	if !ok {
		return engineMirrorGather
	}
	return max(engineMirrorGather, min(engineMirrorPace, last.Add(engineMirrorPace).Sub(now)))
}

// readAt notes that volume's engine was read at t for a mirror that
// changed its Engine's status.
func (m *engineMirrors) readAt(volume string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read[volume] = t
}

// listWait is how long a change of volume's snapshot list alone waits
// before it is written: the rest of engineListPace since the list was last
// written, zero when that is a pace old (or the clock went back).
func (m *engineMirrors) listWait(volume string, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.listed[volume]
	if !ok {
		return 0
	}
	return min(engineListPace, max(0, last.Add(engineListPace).Sub(now)))
}

// listedAt notes that volume's Engine status was written at t for a
// change of its snapshot list alone.
func (m *engineMirrors) listedAt(volume string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listed[volume] = t
}

// backupEnded tells whether volume's engine, which has ended finished
// backups, ended one since its Engine status was last written. That
// change is mirrored at once, neither gathered nor paced: the end of a
// backup is what its Backup object (controller/backup, which reads the
// volume from the target when the Engine says it ended), a backup job's
// retention, a `bak` VolumeSnapshot and a user on backupList wait for,
// and a volume runs one backup at a time, so it comes alone.
func (m *engineMirrors) backupEnded(volume string, finished uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return finished != m.finished[volume]
}

// finishedAt notes that volume's Engine status holds what its engine
// reported once it had ended finished backups.
func (m *engineMirrors) finishedAt(volume string, finished uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.finished[volume] = finished
}

type engineMirror struct {
	engine          instance.Engine
	generation      uint64
	resourceVersion string
}

// current tells whether obj's status already holds what engine reports
// at generation gen.
func (m *engineMirrors) current(volume string, engine instance.Engine, gen uint64, obj *longhorn.Engine) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.seen[volume]
	return ok && s.engine == engine && s.generation == gen && s.resourceVersion == obj.ResourceVersion
}

// record notes that the Engine object at resourceVersion holds what engine
// reported at generation gen.
func (m *engineMirrors) record(volume string, engine instance.Engine, gen uint64, resourceVersion string) {
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
	delete(m.listed, volume)
	delete(m.finished, volume)
}
