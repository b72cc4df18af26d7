package device

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Manager makes and keeps the devices of a node's volumes in its folder:
// VOLUME.json records what was made, fuse/VOLUME is nbdfuse's mount (its
// pid file and log beside it, fuse/VOLUME.pid and .log).
type Manager struct {
	dir string
	log *logrus.Entry

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

var _ Service = (*Manager)(nil)

// NewManager keeps devices in dir, which it makes (mode 0700: its records
// name the node's devices).
func NewManager(dir string, log *logrus.Entry) (*Manager, error) {
	if err := os.MkdirAll(filepath.Join(dir, "fuse"), 0o700); err != nil {
		return nil, err
	}
	// A loop device names its file by its real path.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return &Manager{dir: abs, log: log, locks: map[string]*sync.Mutex{}}, nil
}

// Dir is the folder the manager keeps its devices in.
func (m *Manager) Dir() string { return m.dir }

func (m *Manager) recordPath(id string) string { return filepath.Join(m.dir, id+".json") }

// FuseDir is where nbdfuse mounts a volume's export.
func (m *Manager) FuseDir(id string) string { return filepath.Join(m.dir, "fuse", id) }

// lock takes a volume for one call; another waits its turn.
func (m *Manager) lock(id string) func() {
	m.mu.Lock()
	l, ok := m.locks[id]
	if !ok {
		l = &sync.Mutex{}
		m.locks[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// load reads a volume's record, sanitized; nil, nil when it has none.
func (m *Manager) load(id string) (*Record, error) {
	r, err := loadRecord(m.recordPath(id))
	if err != nil || r == nil {
		return nil, err
	}
	return Sanitize(r, id, m.FuseDir(id), m.log), nil
}

func (m *Manager) save(r *Record) error { return saveRecord(m.recordPath(r.VolumeID), r) }

func (m *Manager) remove(id string) error {
	if err := os.Remove(m.recordPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func status(r *Record) Status {
	st := Status{VolumeID: r.VolumeID, Endpoint: r.Endpoint, Device: r.Device, Window: r.Window}
	st.Why = health(r)
	st.Healthy = st.Why == ""
	if r.Device != "" && r.FuseFile != "" && loopBackingFile(r.Device) == r.FuseFile {
		st.Attached = true
		st.Size, _ = LoopSize(r.Device)
	}
	return st
}

func (m *Manager) Stage(ctx context.Context, id, endpoint string) (Status, error) {
	if err := checkVolumeID(id); err != nil {
		return Status{}, err
	}
	if err := checkEndpoint(endpoint); err != nil {
		return Status{}, err
	}
	defer m.lock(id)()
	log := m.log.WithFields(logrus.Fields{"volume": id, "endpoint": endpoint})
	r, err := m.load(id)
	if err != nil {
		return Status{}, err
	}
	if r != nil {
		st := status(r)
		switch {
		case r.Endpoint != endpoint:
			return st, fmt.Errorf("%w: volume %s has a device of another export, %s (attached again since?): unstage it first", ErrPrecondition, id, r.Endpoint)
		case !st.Healthy:
			return st, fmt.Errorf("%w: volume %s's device no longer stands (%s): unstage it first", ErrPrecondition, id, st.Why)
		}
		return st, nil
	}
	r = &Record{VolumeID: id, Endpoint: endpoint, FuseDir: m.FuseDir(id)}
	// Recorded before anything is made: whatever is made is found again.
	if err := m.save(r); err != nil {
		return Status{}, err
	}
	if err := connect(ctx, r, m.save, log); err != nil {
		if rerr := Release(r, false, log); rerr != nil {
			log.WithError(rerr).Warn("Could not undo a device made part way; its record is kept")
		} else if rerr := m.remove(id); rerr != nil {
			log.WithError(rerr).Warn("Could not remove the record of a device undone")
		}
		return Status{}, fmt.Errorf("make a block device of volume %s's export %s: %w", id, endpoint, err)
	}
	return status(r), nil
}

func (m *Manager) Unstage(_ context.Context, id string) error {
	if err := checkVolumeID(id); err != nil {
		return err
	}
	defer m.lock(id)()
	r, err := m.load(id)
	if err != nil || r == nil {
		return err
	}
	log := m.log.WithFields(logrus.Fields{"volume": id, "endpoint": r.Endpoint})
	if err := Release(r, false, log); err != nil {
		return fmt.Errorf("volume %s's device: %w", id, err)
	}
	if err := m.remove(id); err != nil {
		return err
	}
	log.WithField("device", r.Device).Info("Removed the volume's device")
	return nil
}

func (m *Manager) Get(_ context.Context, id string) (Status, error) {
	if err := checkVolumeID(id); err != nil {
		return Status{}, err
	}
	r, err := m.load(id)
	if err != nil {
		return Status{}, err
	}
	if r == nil {
		return Status{}, fmt.Errorf("%w: volume %s has no device here", ErrNotFound, id)
	}
	return status(r), nil
}

// ids are the volumes the folder has a record of; a file whose name is no
// volume's is not read.
func (m *Manager) ids() []string {
	files, _ := filepath.Glob(filepath.Join(m.dir, "*.json"))
	var out []string
	for _, f := range files {
		if id := strings.TrimSuffix(filepath.Base(f), ".json"); VolumeIDPattern.MatchString(id) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (m *Manager) List(ctx context.Context) ([]Status, error) {
	var out []Status
	for _, id := range m.ids() {
		st, err := m.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (m *Manager) Expand(ctx context.Context, id string) (Status, error) {
	if err := checkVolumeID(id); err != nil {
		return Status{}, err
	}
	defer m.lock(id)()
	r, err := m.load(id)
	if err != nil {
		return Status{}, err
	}
	if r == nil {
		return Status{}, fmt.Errorf("%w: volume %s has no device here", ErrNotFound, id)
	}
	return ExpandRecord(ctx, r, m.log)
}

// RecordStatus is what is known of the device r records (from Sanitize).
func RecordStatus(r *Record) Status { return status(r) }

// ExpandRecord grows the device r records (from Sanitize) to its export's
// size now: a Manager's, or one a CSI driver of an earlier version made.
func ExpandRecord(ctx context.Context, r *Record, log *logrus.Entry) (Status, error) {
	id := r.VolumeID
	st := status(r)
	switch {
	case !st.Healthy:
		return st, fmt.Errorf("%w: volume %s's device no longer stands (%s): unstage and stage it again", ErrPrecondition, id, st.Why)
	case !r.Window:
		return st, fmt.Errorf("%w: volume %s's device was made before devices could grow (its nbdfuse reads the export, not its window): unstage and stage it again, then expand", ErrPrecondition, id)
	}
	size, err := ExportSize(ctx, r.Endpoint)
	if err != nil {
		return st, fmt.Errorf("%w: read volume %s's size from its engine: %w", ErrUnavailable, id, err)
	}
	if size > st.Size {
		if err := growLoop(r.Device, size); err != nil {
			return st, fmt.Errorf("grow volume %s's device %s from %d to %d bytes: %w", id, r.Device, st.Size, size, err)
		}
		log.WithFields(logrus.Fields{"volume": id, "device": r.Device, "from": st.Size, "to": size}).Info("Grew the volume's device")
	}
	return status(r), nil
}

// Recover goes through the folder once, as a new process starts on it: a
// device that still stands is adopted (kept, and served as before); what
// one that no longer stands left (its process died: a FUSE mount whose
// nbdfuse is gone, loop devices reading it, an nbdfuse whose export
// stopped) is undone and its record removed, so that the volume's next
// stage makes it anew. A FUSE folder no record names is undone too.
func (m *Manager) Recover() {
	known := map[string]bool{}
	for _, id := range m.ids() {
		known[id] = true
		unlock := m.lock(id)
		r, err := m.load(id)
		if err != nil || r == nil {
			unlock()
			if err != nil {
				m.log.WithError(err).WithField("volume", id).Warn("Cannot read the device's record; it is left as it is")
			}
			continue
		}
		log := m.log.WithFields(logrus.Fields{"volume": id, "endpoint": r.Endpoint, "device": r.Device})
		if why := health(r); why == "" {
			log.WithField("pid", r.NbdfusePID).Info("Adopted the volume's device, which still stands")
		} else {
			log.WithField("why", why).Warn("Undoing what a device that no longer stands left, for the volume's next stage to make it again")
			if err := Release(r, true, log); err != nil {
				log.WithError(err).Warn("Could not undo all of it; its record is kept")
			} else if err := m.remove(id); err != nil {
				log.WithError(err).Warn("Could not remove the device's record")
			}
		}
		unlock()
	}
	dirs, _ := os.ReadDir(filepath.Join(m.dir, "fuse"))
	for _, d := range dirs {
		id := d.Name()
		if !d.IsDir() || known[id] || !VolumeIDPattern.MatchString(id) {
			continue
		}
		log := m.log.WithField("volume", id)
		log.Warn("Undoing a device folder no record names")
		r := &Record{VolumeID: id, FuseDir: m.FuseDir(id), FuseFile: filepath.Join(m.FuseDir(id), fuseFileName)}
		if err := Release(r, true, log); err != nil {
			log.WithError(err).Warn("Could not undo it")
		}
	}
}

// syncTimeout bounds Sync's wait for one device.
const syncTimeout = 10 * time.Second

// Sync flushes every device that stands, so that what the kernel holds
// for them reaches their engines: before the engines stop.
func (m *Manager) Sync() {
	var wg sync.WaitGroup
	for _, id := range m.ids() {
		r, err := m.load(id)
		if err != nil || r == nil || health(r) != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() { syncFile(r.Device); syncFile(r.FuseFile); close(done) }()
			select {
			case <-done:
			case <-time.After(syncTimeout):
				m.log.WithFields(logrus.Fields{"volume": r.VolumeID, "device": r.Device}).Warn("The volume's device did not flush in time")
			}
		}()
	}
	wg.Wait()
}
