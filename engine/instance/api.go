package instance

import (
	"context"
	"errors"
	"fmt"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// Instances is how the manager's controllers run the engines of their
// node's volumes, wherever those run: in the manager's own process
// (Local) or in the node's instance manager (package instance/remote).
// It is the seam of docs/design-data-plane.md, "The control API".
type Instances interface {
	// Start starts the volume's engine unless it runs, and returns it, as
	// Engines.Start does.
	Start(volume string, size int64, replicas []ReplicaDir, frontend bool, opts ...StartOption) (Instance, error)
	// Get returns the volume's running engine.
	Get(volume string) (Instance, bool)
	// Stop stops the volume's engine, if one runs.
	Stop(volume string) error
	// StopEngine stops the volume's engine if it is still e, and not one
	// started since in its place.
	StopEngine(volume string, e Engine) error
	// OnChange registers f to be called after each change of an engine's
	// snapshots, replicas or operations; OnStart, after an engine starts.
	// Register before the first Start.
	OnChange(f func(volume string))
	OnStart(f func(volume string))
	// Close ends what the manager holds of the engines as it stops: an
	// in-process engine stops with it, one in an instance manager does
	// not.
	Close()
}

// ErrUnreachable marks a call that did not reach the engines' process, or
// whose answer did not come back: what it did is not known, and the
// engine may well run on.
var ErrUnreachable = errors.New("the instance manager cannot be reached")

// Instance is a running engine and its frontend's NBD URI (empty without
// one).
type Instance struct {
	Engine   Engine
	Endpoint string
	// Restarted is set by the Start that started the engine again after
	// the process it ran in was lost (an instance manager that died), and
	// says why; "" otherwise. It is said once.
	Restarted string
	// InstanceManager names the InstanceManager the engine runs in, when
	// it is a pod's (--instance-manager-runner=pod); "" otherwise.
	InstanceManager string
	// Image is that InstanceManager's image: the engine's version. ""
	// when InstanceManager is.
	Image string
}

// Engine is a running engine's control API as the controllers call it.
// Each call is one of the engine's control API (counted as such) unless
// it says otherwise.
type Engine interface {
	Name() string
	// Size is the volume's size as the engine serves it.
	Size() int64
	// Generation moves at each change of what Status reports; it is not a
	// call of the control API.
	Generation() uint64
	// BackupsFinished counts the backups the engine has ended, completed
	// or failed; it moves before the change that reports the end. Not a
	// call of the control API.
	BackupsFinished() uint64
	Status() volumeengine.Status
	// ReplicaFailures says why each ERR replica is not used; not a call.
	ReplicaFailures() map[string]volumeengine.Failure
	// WasPurged reports whether the engine purged a removed snapshot of
	// that name; not a call.
	WasPurged(snapshot string) bool
	CreateSnapshot(name string, labels map[string]string) (string, error)
	DeleteSnapshot(name string) error
	Snapshot(name string) (replica.Snapshot, error)
	StartPurge()
	Expand(size int64) error
	// RestoreFrom writes the backup at backupURL into the volume, opening
	// its target with cred (nil when the target takes none), and returns
	// when done; RestoreStatus follows it.
	RestoreFrom(ctx context.Context, backupURL string, cred map[string]string) error
	RestoreStatus() volumeengine.RestoreStatus
	// CloneFrom writes snapshot of source's engine (which runs where this
	// one does) into the volume, holding the snapshot meanwhile; dataSource
	// names it for the status and logs. CloneStatus follows it.
	CloneFrom(ctx context.Context, source Engine, snapshot, dataSource string) error
	CloneStatus() volumeengine.CloneStatus
	// StartRebuild rebuilds a new, empty replica into the engine from
	// healthy replica from ("": the engine picks one, of its own node
	// first), while the volume is in use (Rebuild); it returns once the
	// replica has joined as WO, and Status().Rebuilds follows the copy. An
	// instance manager too old to rebuild is ErrUnimplemented (package
	// instancemanager); a replica of an older one is
	// volumeengine.ErrNotCarried.
	StartRebuild(r RebuildReplica, from string) error
}

// Local runs the engines in this process: m's. defaults are given to
// every start before its own options (the TLS remote replicas are
// reached with).
func Local(m *Engines, defaults ...StartOption) Instances { return local{m, defaults} }

type local struct {
	m        *Engines
	defaults []StartOption
}

// localEngine is an in-process engine with what the Engine interface adds
// to its methods.
type localEngine struct{ *volumeengine.Engine }

func (l local) Start(volume string, size int64, replicas []ReplicaDir, frontend bool, opts ...StartOption) (Instance, error) {
	run, err := l.m.Start(volume, size, replicas, frontend, append(append([]StartOption{}, l.defaults...), opts...)...)
	return wrap(run), err
}

func (l local) Get(volume string) (Instance, bool) {
	run, ok := l.m.Get(volume)
	return wrap(run), ok
}

func (l local) Stop(volume string) error { return l.m.Stop(volume) }

func (l local) StopEngine(volume string, e Engine) error {
	le, ok := e.(localEngine)
	if !ok {
		return nil
	}
	return l.m.StopEngine(volume, le.Engine)
}

func (l local) OnChange(f func(volume string)) { l.m.OnChange(f) }
func (l local) OnStart(f func(volume string))  { l.m.OnStart(f) }
func (l local) Close()                         { l.m.StopAll() }

func wrap(run Running) Instance {
	if run.Engine == nil {
		return Instance{}
	}
	return Instance{Engine: localEngine{run.Engine}, Endpoint: run.Endpoint}
}

func (e localEngine) RestoreFrom(ctx context.Context, backupURL string, cred map[string]string) error {
	store, volume, backup, err := OpenBackup(backupURL, cred)
	if err != nil {
		return err
	}
	return e.Restore(ctx, store, volume, backup)
}

// OpenBackup opens the target of backupURL with cred and returns it, with
// the backup's volume and name.
func OpenBackup(backupURL string, cred map[string]string) (*backupstore.Store, string, string, error) {
	target, volume, backup, err := backupstore.ParseURL(backupURL)
	if err != nil {
		return nil, "", "", err
	}
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		return nil, "", "", err
	}
	return store, volume, backup, nil
}

func (e localEngine) CloneFrom(ctx context.Context, source Engine, snapshot, dataSource string) error {
	src, ok := source.(localEngine)
	if !ok {
		return fmt.Errorf("clone of volume %s: the source's engine (%s) does not run in this process", e.Name(), source.Name())
	}
	return CloneLocal(ctx, e.Engine, src.Engine, snapshot, dataSource)
}

// CloneLocal clones snapshot of src into dst, both engines of this
// process, holding the snapshot in src while it runs.
func CloneLocal(ctx context.Context, dst, src *volumeengine.Engine, snapshot, dataSource string) error {
	view, release, err := src.OpenSnapshotForClone(snapshot)
	if err != nil {
		return err
	}
	defer release()
	return dst.Clone(ctx, dataSource, view)
}
