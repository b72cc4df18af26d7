package instancemanager

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
	enginepb "github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Engines is what the controller reads of the client of one instance
// manager.
type Engines interface {
	// Connected says whether the client follows the instance manager now.
	Connected() bool
	// Hosting is how many engines it runs.
	Hosting() int
	// Running lists them.
	Running() []instancemanager.Running
}

// Client is the manager's client of one of its node's instance managers:
// instancemanager.Client.
type Client interface {
	instance.Instances
	// ReplicaServer serves the node's replicas to other nodes' engines
	// (replicas.go).
	instance.ReplicaServer
	Engines
	// Lost says whether the instance manager stopped the volume's engine
	// without being asked (it died).
	Lost(volume string) bool
	// Engine is the client of its engine service.
	Engine() enginepb.EngineClient
}

// Member is one of the node's instance managers as the Set is given it.
type Member struct {
	Name, Image string
	Client      Client
	// Devices is the client of the devices it keeps (its DeviceService);
	// nil when it keeps none.
	Devices device.Service
}

type member struct {
	Member
	// starting counts the engine starts sent to it and not answered.
	starting int
	// retiring is set once Retire decided to delete it: nothing starts
	// in it any more.
	retiring bool
}

// deviceLookTimeout bounds the look at an older instance manager's
// devices before an engine starts.
const deviceLookTimeout = 10 * time.Second

// Set is the node's instance managers as one instance.Instances: the one
// of the manager's image, where new engines start, and those of other
// images found at start, each hosting the engines (and their volumes'
// devices) it ran when the manager's image changed. A volume's engine
// moves to the manager's image when it next starts after its volume
// detached: volume by volume, as Longhorn's engine upgrade, and no
// running engine is ever stopped for it. An instance manager of another
// image that hosts nothing is deleted (Retire).
type Set struct {
	keeper *Keeper
	log    *logrus.Entry

	mu      sync.Mutex
	current *member
	others  map[string]*member
}

var _ instance.Instances = (*Set)(nil)

// NewSet returns the node's instance managers: current, the manager
// image's, and the others found running.
func NewSet(keeper *Keeper, current Member, others []Member) *Set {
	s := &Set{keeper: keeper, log: keeper.log, current: &member{Member: current}, others: map[string]*member{}}
	for _, o := range others {
		s.others[o.Name] = &member{Member: o}
	}
	return s
}

// members are the current one and then the others, by name.
func (s *Set) members() []*member {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*member{s.current}
	names := make([]string, 0, len(s.others))
	for n := range s.others {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, s.others[n])
	}
	return out
}

// Names are the instance managers the set holds.
func (s *Set) Names() []string {
	var out []string
	for _, m := range s.members() {
		out = append(out, m.Name)
	}
	return out
}

// Member returns the client of the instance manager named name, if the
// set holds it.
func (s *Set) Member(name string) (Engines, bool) {
	for _, m := range s.members() {
		if m.Name == name {
			return m.Client, true
		}
	}
	return nil, false
}

// Current is the client of the instance manager of the manager's image.
func (s *Set) Current() Client { return s.current.Client }

// hosting is the member that runs the volume's engine, or nil.
func (s *Set) hosting(volume string) (*member, instance.Instance) {
	for _, m := range s.members() {
		if run, ok := m.Client.Get(volume); ok {
			return m, run
		}
	}
	return nil, instance.Instance{}
}

// home is where the volume's engine is to start: where it runs; where it
// ran when its instance manager died (its device is there, reading that
// instance manager's own exports); where its device is; else the current
// one. An older instance manager that cannot say whether it keeps the
// volume's device is waited for: an engine started elsewhere would leave
// that device reading nothing.
func (s *Set) home(volume string) (*member, error) {
	if m, _ := s.hosting(volume); m != nil {
		return m, nil
	}
	members := s.members()
	for _, m := range members[1:] {
		if m.Client.Lost(volume) {
			return m, nil
		}
	}
	for _, m := range members[1:] {
		if m.Devices == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), deviceLookTimeout)
		_, err := m.Devices.Get(ctx, volume)
		cancel()
		switch {
		case err == nil:
			return m, nil
		case !errors.Is(err, device.ErrNotFound):
			return nil, fmt.Errorf("%w: instance manager %s (image %s), which may keep the volume's device, does not answer: %v",
				instance.ErrUnreachable, m.Name, m.Image, err)
		}
	}
	return members[0], nil
}

func (s *Set) Start(volume string, size int64, replicas []instance.ReplicaDir, frontend bool, opts ...instance.StartOption) (instance.Instance, error) {
	m, err := s.home(volume)
	if err != nil {
		return instance.Instance{}, err
	}
	s.mu.Lock()
	if m.retiring {
		m = s.current
	}
	m.starting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		m.starting--
		s.mu.Unlock()
	}()
	run, err := m.Client.Start(volume, size, replicas, frontend, opts...)
	if err == nil {
		run.InstanceManager, run.Image = m.Name, m.Image
	}
	return run, err
}

func (s *Set) Get(volume string) (instance.Instance, bool) {
	m, run := s.hosting(volume)
	if m == nil {
		return instance.Instance{}, false
	}
	run.InstanceManager, run.Image = m.Name, m.Image
	return run, true
}

// Stop stops the volume's engine where it runs (in the current instance
// manager when none lists it, as a single one would be asked).
func (s *Set) Stop(volume string) error {
	m, _ := s.hosting(volume)
	if m == nil {
		m = s.current
	}
	return m.Client.Stop(volume)
}

func (s *Set) StopEngine(volume string, e instance.Engine) error {
	m, run := s.hosting(volume)
	if m == nil || run.Engine != e {
		return nil
	}
	return m.Client.StopEngine(volume, e)
}

func (s *Set) OnChange(f func(volume string)) {
	for _, m := range s.members() {
		m.Client.OnChange(f)
	}
}

func (s *Set) OnStart(f func(volume string)) {
	for _, m := range s.members() {
		m.Client.OnStart(f)
	}
}

// Close stops following every instance manager; their engines run on.
func (s *Set) Close() {
	for _, m := range s.members() {
		m.Client.Close()
		if c, ok := m.Devices.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
}

// EngineFor is the client of the engine service of the instance manager
// that runs the volume's engine (the current one's when none does): the
// forwarder's route.
func (s *Set) EngineFor(volume string) enginepb.EngineClient {
	if m, _ := s.hosting(volume); m != nil {
		return m.Client.Engine()
	}
	return s.current.Client.Engine()
}

// Retire deletes im, one of the set's instance managers of another
// image, with its pod, once it hosts nothing: its client follows it and
// it runs no engine, keeps no device and serves no replica to another
// node's engine, and no start is on its way to it; or its pod is gone or
// ended. It says whether it deleted it.
func (s *Set) Retire(ctx context.Context, im *longhorn.InstanceManager, pod *corev1.Pod) (bool, error) {
	s.mu.Lock()
	m := s.others[im.Name]
	s.mu.Unlock()
	if m == nil {
		return false, nil
	}
	log := s.log.WithFields(logrus.Fields{"instanceManager": im.Name, "image": im.Spec.Image, "newImage": s.keeper.cfg.Image})
	ended := pod == nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	why := "its pod is gone or ended"
	if !ended {
		if !m.Client.Connected() || m.Client.Hosting() > 0 {
			return false, nil
		}
		if servesAny(m) {
			return false, nil
		}
		if m.Devices != nil {
			lctx, cancel := context.WithTimeout(ctx, deviceLookTimeout)
			devices, err := m.Devices.List(lctx)
			cancel()
			if err != nil || len(devices) > 0 {
				return false, nil
			}
		}
		why = "it hosts no engine, keeps no device and serves no replica"
	}
	s.mu.Lock()
	if m.starting > 0 || (!ended && m.Client.Hosting() > 0) {
		s.mu.Unlock()
		return false, nil
	}
	m.retiring = true
	s.mu.Unlock()
	if err := s.keeper.remove(ctx, im); err != nil {
		s.mu.Lock()
		m.retiring = false
		s.mu.Unlock()
		return false, err
	}
	s.mu.Lock()
	delete(s.others, im.Name)
	s.mu.Unlock()
	m.Client.Close()
	if c, ok := m.Devices.(interface{ Close() error }); ok {
		_ = c.Close()
	}
	log.WithField("reason", why).Info("Deleted an instance manager of another image than the manager's: its volumes' engines run in the manager's image now")
	return true, nil
}

// Forget drops im from the set when it was deleted by another (a user):
// its client stops following it.
func (s *Set) Forget(name string) {
	s.mu.Lock()
	m := s.others[name]
	delete(s.others, name)
	s.mu.Unlock()
	if m != nil {
		m.Client.Close()
	}
}
