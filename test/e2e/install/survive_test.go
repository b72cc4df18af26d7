//go:build e2enode

package install

// What the workload sees while the manager is killed, its DaemonSet rolled
// and upgraded: the engines and devices run in the instance manager's pod,
// which none of these touches.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// writeWhile runs, in pod, a writer of files of 64 KiB, each synced, 0.1
// s apart, while during() runs, and checks that the writer was still
// writing when during() returned, that every write succeeded and that
// every file reads back as written.
func writeWhile(t *testing.T, c *cluster.Cluster, pod string, files int, during func()) {
	t.Helper()
	written := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = c.TryKubectl("", "-n", workloadNS, "exec", pod, "--", "sh", "-c",
			fmt.Sprintf(`set -e; cd /data; rm -f w.* WSUMS; i=0; while [ $i -lt %d ]; do head -c 65536 /dev/urandom > w.$i; sync w.$i; i=$((i+1)); sleep 0.1; done; sha256sum w.* > WSUMS; sync WSUMS; echo written`, files))
		written <- err
	}()
	time.Sleep(3 * time.Second)
	during()
	select {
	case err := <-written:
		t.Fatalf("the writer ended before what it was to outlast was over (%v): give it more files\n%s", err, out)
	default:
	}
	select {
	case err := <-written:
		if err != nil || !strings.Contains(out, "written") {
			t.Fatalf("the pod's writes: %v\n%s", err, out)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the pod's writes did not end within 3 minutes")
	}
	if check, err := c.TryKubectl("", "-n", workloadNS, "exec", pod, "--", "sh", "-c", "cd /data && sha256sum -c WSUMS"); err != nil || strings.Count(check, ": OK") != files {
		t.Fatalf("the files written do not match their checksums: %v\n%s", err, check)
	}
	checkFiles(t, c, workloadNS, pod)
}

// checkManagerKillKeepsIO kills the manager's container (SIGKILL, as its
// out-of-memory kill would) while the pod writes and syncs files: the
// writes all succeed, since the engine and the device run in the
// instance manager's pod, which goes on; the kubelet starts the manager
// again, which adopts the engine, and the volume is attached and healthy
// as before.
func checkManagerKillKeepsIO(t *testing.T, c *cluster.Cluster, pod string) {
	before := managerPodRestarts(t, c)
	imBefore := instanceManagerPod(t, c)
	writeWhile(t, c, pod, 150, func() {
		pid := managerDaemonPID(t)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the manager (pid %d): %v", pid, err)
		}
		t.Logf("killed the manager's daemon, pid %d, while the pod writes", pid)
	})
	volume := claimVolume(t, c, workloadNS, "data-"+pod)
	waitFor(t, "the manager started again, the instance manager not, and volume "+volume+" attached and healthy", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		after := managerPodRestarts(t, c)
		state, err := c.TryKubectl("", "-n", namespace, "get", "lhv", volume, "-o", "jsonpath={.status.state}/{.status.robustness}")
		if err != nil {
			return false, err.Error(), nil
		}
		im := instanceManagerPod(t, c)
		ok := after["longhorn-manager"] > before["longhorn-manager"] && im == imBefore && state == "attached/healthy"
		return ok, fmt.Sprintf("restarts before %v, now %v; instance manager before %v, now %v; volume %s", before, after, imBefore, im, state), nil
	}, func() string { return c.PodsDiagnosis(c.KubeClient(t), namespace) })
}

// checkDaemonSetRollKeepsIO rolls the manager's DaemonSet (kubectl
// rollout restart, as an upgrade does) while the pod writes and syncs
// files, and waits for the roll to end before the writer does: the manager's pod, CSI plugin included, is replaced, and every
// write succeeds, since the engine and the device run in the instance
// manager's pod, which is not the DaemonSet's; the new manager adopts it,
// and its InstanceManager says it runs the volume's engine.
func checkDaemonSetRollKeepsIO(t *testing.T, c *cluster.Cluster, pod string) {
	imBefore := instanceManagerPod(t, c)
	oldPods := managerPodNames(t, c)
	// The whole roll, the old pod gone and the new one ready, happens
	// while the writer writes.
	writeWhile(t, c, pod, 600, func() {
		c.Kubectl(t, "", "-n", namespace, "rollout", "restart", "daemonset/longhorn-manager")
		c.Kubectl(t, "", "-n", namespace, "rollout", "status", "daemonset/longhorn-manager", "--timeout=50s")
		t.Logf("rolled the manager's DaemonSet (pods %v, now %v) while the pod writes", oldPods, managerPodNames(t, c))
	})
	if now := managerPodNames(t, c); slices.Equal(now, oldPods) {
		t.Fatalf("the DaemonSet's pods were not replaced: %v", now)
	}
	volume := claimVolume(t, c, workloadNS, "data-"+pod)
	waitFor(t, "the new manager adopting the instance manager, and volume "+volume+" attached and healthy", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		state, err := c.TryKubectl("", "-n", namespace, "get", "lhv", volume, "-o", "jsonpath={.status.state}/{.status.robustness}")
		if err != nil {
			return false, err.Error(), nil
		}
		ims, err := c.TryKubectl("", "-n", namespace, "get", "lhim", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.currentState}:{.status.instanceEngines.*.spec.volumeName};{end}`)
		if err != nil {
			return false, err.Error(), nil
		}
		engineIn, err := c.TryKubectl("", "-n", namespace, "get", "lhe", volume+"-e-0", "-o", "jsonpath={.status.instanceManagerName}")
		if err != nil {
			return false, err.Error(), nil
		}
		im := instanceManagerPod(t, c)
		want := imBefore.name + "=running:" + volume + ";"
		return im == imBefore && state == "attached/healthy" && ims == want && engineIn == imBefore.name,
			fmt.Sprintf("instance manager pod before %v, now %v; InstanceManagers %s (want %s); volume %s, its engine in %q", imBefore, im, ims, want, state, engineIn), nil
	}, func() string { return c.PodsDiagnosis(c.KubeClient(t), namespace) })
}

// checkUpgradeMovesEachEngineAtItsDetach upgrades the manager's DaemonSet
// to a new image (the same bytes, tagged longhorn-manager:next) while the
// pod writes, with a second replica of the StatefulSet attached too: no
// write fails; the instance manager of the old image keeps both volumes'
// engines, says it runs another image than the manager's, and one of the
// new image runs beside it. Each volume moves at its own detach: the
// second replica scaled away and back runs in the new one while the first
// runs on in the old one, each Volume's currentImage saying which; once
// both detach the old instance manager is deleted, and the pod made again
// runs in the new one.
func checkUpgradeMovesEachEngineAtItsDetach(t *testing.T, c *cluster.Cluster, pod string) {
	const old, next = "longhorn-manager:dev", "longhorn-manager:next"
	if err := c.TagImage(context.Background(), "docker.io/library/"+old, "docker.io/library/"+next); err != nil {
		t.Fatal(err)
	}
	second := strings.TrimSuffix(pod, "-0") + "-1"
	c.Kubectl(t, "", "-n", workloadNS, "scale", "statefulset/shop-db", "--replicas=2")
	waitPodReady(t, c, workloadNS, second, 3*time.Minute)
	volume, secondVolume := claimVolume(t, c, workloadNS, "data-"+pod), claimVolume(t, c, workloadNS, "data-"+second)
	imBefore := instanceManagerPod(t, c)
	writeWhile(t, c, pod, 600, func() {
		c.Kubectl(t, "", "-n", namespace, "set", "image", "daemonset/longhorn-manager", "longhorn-manager="+next, "longhorn-csi-plugin="+next)
		c.Kubectl(t, "", "-n", namespace, "rollout", "status", "daemonset/longhorn-manager", "--timeout=50s")
		t.Logf("upgraded the manager's DaemonSet to %s while the pod writes", next)
	})
	diagnose := func() string { return c.PodsDiagnosis(c.KubeClient(t), namespace) }
	var newIM string
	waitFor(t, "the old image's instance manager keeping both engines, and one of the new image beside it", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		ims, err := instanceManagers(c)
		if err != nil {
			return false, err.Error(), nil
		}
		newIM = ims.ofImage(next)
		msg, _ := c.TryKubectl("", "-n", namespace, "get", "lhim", imBefore.name, "-o", "jsonpath={.status.message}")
		return len(ims) == 2 && ims[imBefore.name] == "running:"+old+":"+sorted(volume, secondVolume) && newIM != "" && ims[newIM] == "running:"+next+":" &&
				strings.Contains(msg, "another image"),
			fmt.Sprintf("InstanceManagers %v, the old one's message %q", ims, msg), nil
	}, diagnose)

	// The second replica detaches and attaches again: in the new image.
	c.Kubectl(t, "", "-n", workloadNS, "scale", "statefulset/shop-db", "--replicas=1")
	waitVolumeState(t, c, secondVolume, "detached", diagnose)
	c.Kubectl(t, "", "-n", workloadNS, "scale", "statefulset/shop-db", "--replicas=2")
	waitPodReady(t, c, workloadNS, second, 3*time.Minute)
	waitFor(t, "each volume's engine in its own image's instance manager", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		ims, err := instanceManagers(c)
		if err != nil {
			return false, err.Error(), nil
		}
		images, err := c.TryKubectl("", "-n", namespace, "get", "lhv", volume, secondVolume, "-o", `jsonpath={range .items[*]}{.status.currentImage};{end}`)
		if err != nil {
			return false, err.Error(), nil
		}
		return ims[imBefore.name] == "running:"+old+":"+volume && ims[newIM] == "running:"+next+":"+secondVolume && images == old+";"+next+";",
			fmt.Sprintf("InstanceManagers %v; currentImage of %s and %s: %s", ims, volume, secondVolume, images), nil
	}, diagnose)
	checkFiles(t, c, workloadNS, pod)

	// Both detach: the old instance manager hosts nothing and goes.
	c.Kubectl(t, "", "-n", workloadNS, "scale", "statefulset/shop-db", "--replicas=0")
	waitFor(t, "the volumes detached and the old image's instance manager deleted", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		states, err := c.TryKubectl("", "-n", namespace, "get", "lhv", volume, secondVolume, "-o", `jsonpath={range .items[*]}{.status.state};{end}`)
		if err != nil {
			return false, err.Error(), nil
		}
		ims, err := instanceManagers(c)
		if err != nil {
			return false, err.Error(), nil
		}
		_, oldThere := ims[imBefore.name]
		return states == "detached;detached;" && !oldThere && len(ims) == 1 && strings.HasPrefix(ims[newIM], "running:"+next+":"),
			fmt.Sprintf("volumes %s; InstanceManagers %v", states, ims), nil
	}, diagnose)

	c.Kubectl(t, "", "-n", workloadNS, "scale", "statefulset/shop-db", "--replicas=1")
	waitPodReady(t, c, workloadNS, pod, 3*time.Minute)
	checkFiles(t, c, workloadNS, pod)
	waitFor(t, "the volume's engine in the instance manager of "+next, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		engineIn, err := c.TryKubectl("", "-n", namespace, "get", "lhe", volume+"-e-0", "-o", "jsonpath={.status.instanceManagerName}")
		if err != nil {
			return false, err.Error(), nil
		}
		ims, err := instanceManagers(c)
		if err != nil {
			return false, err.Error(), nil
		}
		return engineIn == newIM && strings.Contains(ims[newIM], volume), fmt.Sprintf("engine in %q; InstanceManagers %v", engineIn, ims), nil
	}, diagnose)
}

// imStates are the InstanceManagers by name, each as
// state:image:its engines' volumes (sorted, comma-separated).
type imStates map[string]string

// ofImage is the name of the instance manager of image, "" for none.
func (m imStates) ofImage(image string) string {
	for name, st := range m {
		if parts := strings.SplitN(st, ":", 4); len(parts) >= 3 && parts[1]+":"+parts[2] == image {
			return name
		}
	}
	return ""
}

func instanceManagers(c *cluster.Cluster) (imStates, error) {
	out, err := c.TryKubectl("", "-n", namespace, "get", "lhim", "-o",
		`jsonpath={range .items[*]}{.metadata.name}={.status.currentState}:{.spec.image}:{.status.instanceEngines.*.spec.volumeName};{end}`)
	if err != nil {
		return nil, err
	}
	m := imStates{}
	for _, item := range strings.Split(strings.TrimSuffix(out, ";"), ";") {
		name, rest, ok := strings.Cut(item, "=")
		if !ok {
			continue
		}
		// state:image(with its tag):volume volume ...
		parts := strings.SplitN(rest, ":", 4)
		if len(parts) < 3 {
			m[name] = rest
			continue
		}
		var volumes []string
		if len(parts) == 4 {
			volumes = strings.Fields(parts[3])
		}
		m[name] = parts[0] + ":" + parts[1] + ":" + parts[2] + ":" + sorted(volumes...)
	}
	return m, nil
}

// sorted joins names, sorted, with commas.
func sorted(names ...string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	return strings.Join(names, ",")
}

// waitVolumeState waits for a Volume's status.state.
func waitVolumeState(t *testing.T, c *cluster.Cluster, volume, state string, diagnose func() string) {
	t.Helper()
	waitFor(t, "volume "+volume+" "+state, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		got, err := c.TryKubectl("", "-n", namespace, "get", "lhv", volume, "-o", "jsonpath={.status.state}")
		return err == nil && got == state, fmt.Sprintf("state %q %v", got, err), nil
	}, diagnose)
}

// podIdentity is a pod as one instance: its name, UID and its container's
// restart count.
type podIdentity struct {
	name     string
	uid      string
	restarts int32
}

// instanceManagerPod is the node's instance manager's pod.
func instanceManagerPod(t *testing.T, c *cluster.Cluster) podIdentity {
	t.Helper()
	pods, err := c.KubeClient(t).CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "longhorn.io/component=instance-manager"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the instance manager's pod: %v (%d pods)", err, len(pods.Items))
	}
	p := pods.Items[0]
	id := podIdentity{name: p.Name, uid: string(p.UID)}
	for _, st := range p.Status.ContainerStatuses {
		id.restarts += st.RestartCount
	}
	return id
}

// managerPodNames are the names of the manager DaemonSet's pods, sorted.
func managerPodNames(t *testing.T, c *cluster.Cluster) []string {
	t.Helper()
	pods, err := c.KubeClient(t).CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app=longhorn-manager"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// managerPodRestarts are the restart counts of the containers of the
// manager DaemonSet's pod, by container.
func managerPodRestarts(t *testing.T, c *cluster.Cluster) map[string]int32 {
	t.Helper()
	pods, err := c.KubeClient(t).CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app=longhorn-manager"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the manager's pod: %v (%d pods)", err, len(pods.Items))
	}
	out := map[string]int32{}
	for _, st := range pods.Items[0].Status.ContainerStatuses {
		out[st.Name] = st.RestartCount
	}
	return out
}

// managerDaemonPID is the host's pid of the manager container's daemon.
func managerDaemonPID(t *testing.T) int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "longhorn-manager" && slices.Contains(args, "daemon") && slices.Contains(args, "--instance-manager-runner=pod") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatal("no longhorn-manager daemon of the DaemonSet runs on this host")
	return 0
}
