//go:build e2e

package volume

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// imVolume is a daemon run as a process with its engines in an instance
// manager, and volume "vol" (64 MiB, one replica) attached to its node
// with a frontend.
type imVolume struct {
	d        *framework.DaemonProcess
	e        *framework.APIEnv
	endpoint string
	im       int // the instance manager's pid
}

const imVolumeSize = 64 << 20

func attachOnInstanceManager(t *testing.T) *imVolume {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	d := framework.StartDaemonProcess(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns,
		"--instance-manager-runner", "process")
	// The instance manager outlives its daemon by design: stop it too.
	t.Cleanup(func() { d.Stop(t); framework.StopInstanceManager(t, d.DataDir()) })
	e := &framework.APIEnv{Base: "http://" + d.API,
		ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: framework.LHClient(t, cluster.Config)}}

	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"64Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "volume detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "vol", "attached with an NBD endpoint", func(v map[string]any) bool {
		s, _ := v["endpoint"].(string)
		return v["state"] == "attached" && strings.HasPrefix(s, "nbd://")
	})
	endpoint := v["endpoint"].(string)
	framework.EventuallyAgree(t, 30*time.Second, "the volume's status once attached", func() string { return statusProblems(t, e, endpoint) })
	im := framework.InstanceManagerPID(t, d.DataDir())
	if im == 0 {
		t.Fatalf("no instance manager runs for %s (log %s)", d.DataDir(), d.LogPath())
	}
	return &imVolume{d: d, e: e, endpoint: endpoint, im: im}
}

// replicaDirs are the folders of vol's replicas, as its Replica objects
// place them.
func (v *imVolume) replicaDirs(t *testing.T) []instance.ReplicaDir {
	t.Helper()
	list, err := v.e.LH.LonghornV1beta2().Replicas(v.e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []instance.ReplicaDir
	for _, r := range list.Items {
		dirs = append(dirs, instance.ReplicaDir{Name: r.Name, Dir: filepath.Join(r.Spec.DiskPath, replica.ReplicasFolder, r.Spec.DataDirectoryName)})
	}
	return dirs
}

// TestInstanceManagerKilledVolumeComesBack: an instance manager that dies
// (SIGKILL: a crash, its memory limit) is started again by the manager,
// which starts the volume's engine in it again on the same endpoint; the
// writer, reconnecting, sees errors only while it is down, and no write
// it had acknowledged is lost. The volume's event and the metrics say so.
func TestInstanceManagerKilledVolumeComesBack(t *testing.T) {
	v := attachOnInstanceManager(t)
	w := framework.StartNBDWriter(t, v.endpoint, imVolumeSize, framework.NBDWriterOptions{Interval: time.Millisecond, Reconnect: true, Timeout: 5 * time.Second})
	defer w.Stop()
	writesGoOn(t, w, "before the kill")
	if err := syscall.Kill(v.im, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	atKill := w.Counts()
	framework.Eventually(t, 60*time.Second, "an instance manager started again", func() (bool, error) {
		pid := framework.InstanceManagerPID(t, v.d.DataDir())
		return pid != 0 && pid != v.im, nil
	})
	what := fmt.Sprintf("the volume's status once its engine runs again (log %s)", v.d.LogPath())
	framework.EventuallyAgree(t, 60*time.Second, what, func() string { return statusProblems(t, v.e, v.endpoint) })
	// From here on the writer writes through the new engine.
	framework.Eventually(t, 60*time.Second, "writes acknowledged by the engine started again", func() (bool, error) {
		return w.Counts().Acked >= atKill.Acked+500, nil
	})
	then := w.Counts()
	framework.Eventually(t, 30*time.Second, "500 writes more, with no error", func() (bool, error) {
		c := w.Counts()
		if c.Errors != then.Errors {
			return false, fmt.Errorf("errors once the engine ran again: %d (first: %v)", c.Errors-then.Errors, c.FirstError)
		}
		return c.Acked >= then.Acked+500, nil
	})
	c := w.Stop()
	t.Logf("writer: %d writes acknowledged, %d errors, all while the instance manager was down (first: %v)", c.Acked, c.Errors, c.FirstError)
	w.Verify(t)
	// The volume and the metrics say what happened.
	v.e.WaitEvent(t, "Volume", "vol", "EngineRestarted", "instance manager", "started again")
	v.e.WaitVolume(t, "vol", "its EngineRestarted condition True, reason InstanceManagerStopped", func(vol map[string]any) bool {
		conds, _ := vol["conditions"].(map[string]any)
		cond, _ := conds["EngineRestarted"].(map[string]any)
		return cond["status"] == "True" && cond["reason"] == "InstanceManagerStopped" && strings.Contains(fmt.Sprint(cond["message"]), "started again")
	})
	m := v.d.Metrics(t)
	if got := m.Sum("longhorn_manager_engine_restarts_total"); got != 1 {
		t.Errorf("longhorn_manager_engine_restarts_total = %v, want 1", got)
	}
	if got := m.Sum("longhorn_manager_instance_manager_starts_total"); got != 2 {
		t.Errorf("longhorn_manager_instance_manager_starts_total = %v, want 2 (the first and its replacement)", got)
	}
	// The condition tells of this attachment: it goes at the detach.
	v.e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	v.e.WaitVolume(t, "vol", "detached, with no EngineRestarted condition", func(vol map[string]any) bool {
		conds, _ := vol["conditions"].(map[string]any)
		_, has := conds["EngineRestarted"]
		return vol["state"] == "detached" && !has
	})
}

// TestSecondEngineOnSameReplicasCannotWrite is the fence's fault test: a
// second instance manager started by hand, and an engine of this very
// process, are both refused the replicas the volume's engine has open,
// while a writer goes on through it with no error and loses nothing.
func TestSecondEngineOnSameReplicasCannotWrite(t *testing.T) {
	v := attachOnInstanceManager(t)
	w := framework.StartNBDWriter(t, v.endpoint, imVolumeSize, framework.NBDWriterOptions{Interval: time.Millisecond})
	defer w.Stop()
	writesGoOn(t, w, "before the second engine")

	// A second instance manager, started by hand.
	c := framework.RunInstanceManager(t, t.TempDir())
	dirs := v.replicaDirs(t)
	if _, err := c.Start("vol", imVolumeSize, dirs, true); err == nil || !strings.Contains(err.Error(), replica.ErrLocked.Error()) {
		t.Fatalf("a second instance manager's engine on the volume's replicas: %v; want it refused as open in another engine", err)
	}
	local := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clock.RealClock{}, logrus.NewEntry(logrus.StandardLogger()), func(string) {}, nil)
	if _, err := local.Start("vol", imVolumeSize, dirs, false); err == nil || !strings.Contains(err.Error(), replica.ErrLocked.Error()) {
		t.Fatalf("an in-process engine on the volume's replicas: %v; want it refused as open in another engine", err)
	}
	writesGoOn(t, w, "after the second engines were refused")
	if p := statusProblems(t, v.e, v.endpoint); p != "" {
		t.Fatalf("the volume after the second engines: %s", p)
	}
	counts := w.Stop()
	if counts.Errors != 0 {
		t.Errorf("the writer saw %d I/O errors (first: %v)", counts.Errors, counts.FirstError)
	}
	w.Verify(t)
	if eng, err := v.e.LH.LonghornV1beta2().Engines(v.e.NS).Get(context.Background(), datastore.EngineName("vol"), metav1.GetOptions{}); err != nil || eng.Status.Endpoint != v.endpoint {
		t.Fatalf("the Engine after the second engines: %v, %v", eng, err)
	}
}
