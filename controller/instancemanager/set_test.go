package instancemanager

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
	enginepb "github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// fakeEngine is a running engine of a fakeClient: only its identity is
// read here.
type fakeEngine struct {
	instance.Engine
	id string
}

// fakeClient is one instance manager's client: the engines it runs, those
// it lost, and the calls it was sent.
type fakeClient struct {
	name      string
	connected bool
	engines   map[string]*fakeEngine
	lost      map[string]bool
	starts    []string
	stops     []string
	closed    bool
	// served are the replicas it serves, at address; old is an instance
	// manager from before the replica RPCs, listErr one that cannot say.
	served      map[string]instance.ServedReplica
	address     string
	old         bool
	listErr     error
	replicaStop []string
}

func newFakeClient(name string, volumes ...string) *fakeClient {
	c := &fakeClient{name: name, connected: true, engines: map[string]*fakeEngine{}, lost: map[string]bool{},
		served: map[string]instance.ServedReplica{}, address: name + ":8502"}
	for _, v := range volumes {
		c.engines[v] = &fakeEngine{id: name + "/" + v}
	}
	return c
}

func (c *fakeClient) Start(volume string, _ int64, _ []instance.ReplicaDir, _ bool, _ ...instance.StartOption) (instance.Instance, error) {
	c.starts = append(c.starts, volume)
	if !c.connected {
		return instance.Instance{}, instance.ErrUnreachable
	}
	e, ok := c.engines[volume]
	if !ok {
		e = &fakeEngine{id: c.name + "/" + volume}
		c.engines[volume] = e
	}
	delete(c.lost, volume)
	return instance.Instance{Engine: e}, nil
}

func (c *fakeClient) Get(volume string) (instance.Instance, bool) {
	e, ok := c.engines[volume]
	if !ok {
		return instance.Instance{}, false
	}
	return instance.Instance{Engine: e}, true
}

func (c *fakeClient) Stop(volume string) error {
	c.stops = append(c.stops, volume)
	delete(c.engines, volume)
	return nil
}

func (c *fakeClient) StopEngine(volume string, e instance.Engine) error {
	if c.engines[volume] == e {
		return c.Stop(volume)
	}
	return nil
}

func (c *fakeClient) OnChange(func(string))         {}
func (c *fakeClient) OnStart(func(string))          {}
func (c *fakeClient) Close()                        { c.closed = true }
func (c *fakeClient) Connected() bool               { return c.connected }
func (c *fakeClient) Hosting() int                  { return len(c.engines) }
func (c *fakeClient) Lost(volume string) bool       { return c.lost[volume] }
func (c *fakeClient) Engine() enginepb.EngineClient { return nil }
func (c *fakeClient) Running() []instancemanager.Running {
	var out []instancemanager.Running
	for v, e := range c.engines {
		out = append(out, instancemanager.Running{Volume: v, ID: e.id})
	}
	return out
}

func (c *fakeClient) ServeReplica(volume, uid string, rd instance.ReplicaDir, size int64) (instance.ServedReplica, error) {
	if c.old {
		return instance.ServedReplica{}, instancemanager.ErrUnimplemented
	}
	sr := instance.ServedReplica{Name: rd.Name, Volume: volume, VolumeUID: uid, Dir: rd.Dir, Size: size, Address: c.address}
	c.served[rd.Name] = sr
	return sr, nil
}

func (c *fakeClient) StopReplica(name string) error {
	if c.old {
		return instancemanager.ErrUnimplemented
	}
	if c.listErr != nil {
		return c.listErr
	}
	c.replicaStop = append(c.replicaStop, name)
	delete(c.served, name)
	return nil
}

func (c *fakeClient) ListReplicas() ([]instance.ServedReplica, string, error) {
	switch {
	case c.old:
		return nil, "", instancemanager.ErrUnimplemented
	case c.listErr != nil:
		return nil, "", c.listErr
	}
	var out []instance.ServedReplica
	for _, sr := range c.served {
		out = append(out, sr)
	}
	return out, c.address, nil
}

// fakeDevices is the devices an instance manager keeps, or its silence.
type fakeDevices struct {
	device.Service
	volumes map[string]bool
	down    bool
}

func (d *fakeDevices) Get(_ context.Context, volume string) (device.Status, error) {
	switch {
	case d.down:
		return device.Status{}, device.ErrUnavailable
	case d.volumes[volume]:
		return device.Status{VolumeID: volume}, nil
	}
	return device.Status{}, device.ErrNotFound
}

func (d *fakeDevices) List(context.Context) ([]device.Status, error) {
	if d.down {
		return nil, device.ErrUnavailable
	}
	var out []device.Status
	for v := range d.volumes {
		out = append(out, device.Status{VolumeID: v})
	}
	return out, nil
}

// newTestSet is node-1's set: the v2 instance manager (current) and the
// v1 one, whose object and running pod exist, each with its client.
func newTestSet(t *testing.T) (*Set, *fakeClient, *fakeClient, *fakeDevices, *longhorn.InstanceManager) {
	t.Helper()
	old := newObject(testConfig, "longhorn-manager:v1")
	k, kube, _ := newTestKeeper(old)
	ctx := context.Background()
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, podFor(testConfig, old, ppEmpty), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPhase(t, kube, old.Name, corev1.PodRunning)
	cur, v1 := newFakeClient("v2"), newFakeClient("v1", "attached-before")
	devices := &fakeDevices{volumes: map[string]bool{"attached-before": true}}
	s := NewSet(k, Member{Name: Name("node-1", testConfig.Image), Image: testConfig.Image, Client: cur, Devices: &fakeDevices{}},
		[]Member{{Name: old.Name, Image: old.Spec.Image, Client: v1, Devices: devices}})
	return s, cur, v1, devices, old
}

func TestSetStartsEachEngineWhereItsVolumeIs(t *testing.T) {
	s, cur, v1, devices, old := newTestSet(t)

	// A volume attached before the upgrade runs on in v1.
	run, err := s.Start("attached-before", 1, nil, true)
	if err != nil || run.InstanceManager != old.Name || run.Image != "longhorn-manager:v1" {
		t.Fatalf("start of the volume v1 runs: %+v %v", run, err)
	}
	if len(cur.starts) != 0 {
		t.Fatalf("the current instance manager was asked to start %v", cur.starts)
	}
	// A new volume starts in the manager's image.
	run, err = s.Start("new", 1, nil, true)
	if err != nil || run.InstanceManager != Name("node-1", testConfig.Image) || run.Image != testConfig.Image {
		t.Fatalf("start of a new volume: %+v %v", run, err)
	}
	if got, ok := s.Get("attached-before"); !ok || got.Image != "longhorn-manager:v1" {
		t.Fatalf("Get of v1's volume: %+v %v", got, ok)
	}

	// v1 died and came back without its engine: it starts there again,
	// where its device reads v1's own exports.
	delete(v1.engines, "attached-before")
	v1.lost["attached-before"] = true
	if run, err := s.Start("attached-before", 1, nil, true); err != nil || run.Image != "longhorn-manager:v1" {
		t.Fatalf("start after v1 lost the engine: %+v %v", run, err)
	}
	// After a manager restart nothing says it was lost; the device does.
	delete(v1.engines, "attached-before")
	if run, err := s.Start("attached-before", 1, nil, true); err != nil || run.Image != "longhorn-manager:v1" {
		t.Fatalf("start of a volume whose device v1 keeps: %+v %v", run, err)
	}
	// While v1 cannot say whether it keeps a volume's device, a volume it
	// does not run does not start: it would be started away from its
	// device.
	devices.down = true
	if _, err := s.Start("detached-volume", 1, nil, true); !errors.Is(err, instance.ErrUnreachable) {
		t.Fatalf("start while v1's devices do not answer: want ErrUnreachable, got %v", err)
	}
	devices.down = false

	// Its volume detaches: it moves to v2 at its next start.
	if err := s.Stop("attached-before"); err != nil {
		t.Fatal(err)
	}
	if len(v1.stops) != 1 || len(cur.stops) != 0 {
		t.Fatalf("stop went to v1 %v and v2 %v", v1.stops, cur.stops)
	}
	delete(devices.volumes, "attached-before")
	if run, err := s.Start("attached-before", 1, nil, true); err != nil || run.Image != testConfig.Image {
		t.Fatalf("start after its detach: %+v %v, want the manager's image", run, err)
	}
}

func TestSetRetiresAnOlderInstanceManagerOnceItHostsNothing(t *testing.T) {
	s, cur, v1, devices, old := newTestSet(t)
	ctx := context.Background()
	kube := s.keeper.kube
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if retired, err := s.Retire(ctx, old, pod); retired || err != nil {
		t.Fatalf("Retire of v1 while it runs an engine: %v %v", retired, err)
	}
	_ = s.Stop("attached-before")
	if retired, _ := s.Retire(ctx, old, pod); retired {
		t.Fatal("Retire of v1 while it keeps a device")
	}
	delete(devices.volumes, "attached-before")
	v1.connected = false
	if retired, _ := s.Retire(ctx, old, pod); retired {
		t.Fatal("Retire of v1 while its client does not follow it (what it runs is not known)")
	}
	v1.connected = true
	if retired, err := s.Retire(ctx, old, pod); !retired || err != nil {
		t.Fatalf("Retire of an idle v1: %v %v", retired, err)
	}
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("v1's pod was not deleted")
	}
	if _, err := s.keeper.lh.LonghornV1beta2().InstanceManagers(ns).Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("v1's InstanceManager was not deleted")
	}
	if !v1.closed || len(s.Names()) != 1 {
		t.Fatalf("v1 is still followed: closed %v, names %v", v1.closed, s.Names())
	}
	if run, err := s.Start("attached-before", 1, nil, true); err != nil || run.Image != testConfig.Image || len(cur.starts) != 1 {
		t.Fatalf("start after v1 went: %+v %v", run, err)
	}
}

func TestSetRetiresAnOlderInstanceManagerWhosePodEnded(t *testing.T) {
	s, _, v1, _, old := newTestSet(t)
	v1.connected = false
	pod := podFor(testConfig, old, ppEmpty)
	pod.Status.Phase = corev1.PodFailed
	if retired, err := s.Retire(context.Background(), old, pod); !retired || err != nil {
		t.Fatalf("Retire of v1 whose pod ended: %v %v", retired, err)
	}
}
