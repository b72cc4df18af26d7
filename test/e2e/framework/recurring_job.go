package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/types"
)

// LiveSnapshots counts the volume's snapshots the engine lists, not
// counting the volume head or those marked removed.
func (e *RunnerEnv) LiveSnapshots(t *testing.T, volume string) float64 {
	t.Helper()
	list := e.Call(t, "POST", "/v1/volumes/"+volume+"?action=snapshotList", "").Expect(t, 200)
	n := 0
	for _, item := range list.Body["data"].([]any) {
		s := item.(map[string]any)
		if s["name"] != "volume-head" && s["removed"] != true {
			n++
		}
	}
	return float64(n)
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// ManagerBinary builds longhorn-manager once for the package's tests.
func ManagerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := testcluster.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "longhorn-manager-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "longhorn-manager")
		out, err := exec.Command("go", "build", "-o", binary, root).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// removeManagerBinary removes what ManagerBinary built, once the
// package's tests are done (a 100 MB binary per package run otherwise).
func removeManagerBinary() {
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
}

// ServiceAccountKubeconfig writes a kubeconfig that acts as the manager's
// ServiceAccount, which the CronJob pods run as.
func ServiceAccountKubeconfig(t *testing.T, cluster *testcluster.Cluster, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + ns + ":" + ServiceAccount
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// RunJob runs `longhorn-manager recurring-job` as a process and returns
// its summary line.
func (e *APIEnv) RunJob(t *testing.T, kubeconfig, job, tick string, args ...string) string {
	t.Helper()
	cmd := exec.Command(ManagerBinary(t), append([]string{"recurring-job", job, "--manager-url", e.Base + "/v1", "--kubeconfig", kubeconfig,
		"--namespace", e.NS, "--tick", tick, "--backup-timeout", "1m"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("recurring-job %s: %v\n%s", job, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func (e *APIEnv) JobSnapshots(t *testing.T, volume, job string) int {
	t.Helper()
	list := e.Call(t, "POST", "/v1/volumes/"+volume+"?action=snapshotList", "").Expect(t, 200)
	n := 0
	for _, item := range list.Body["data"].([]any) {
		s := item.(map[string]any)
		labels, _ := s["labels"].(map[string]any)
		if labels["RecurringJob"] == job && s["removed"] != true {
			n++
		}
	}
	return n
}

// ManagerRunner makes a daemon fire recurring jobs itself.
func ManagerRunner(o *app.DaemonOptions) { o.CronJob.Runner = longhorn.RecurringJobRunnerManager }

// RunnerEnv is a namespace with daemons using the manager runner.
type RunnerEnv struct {
	*APIEnv
	Cfg *rest.Config
}

func NewRunnerEnv(t *testing.T, opts ...func(*app.DaemonOptions)) (*RunnerEnv, *RunningDaemon) {
	t.Helper()
	return NewRunnerEnvIn(t, testcluster.Get(t).NewNamespace(t), opts...)
}

// NewRunnerEnvIn is newRunnerEnv in a namespace the test made.
func NewRunnerEnvIn(t *testing.T, ns string, opts ...func(*app.DaemonOptions)) (*RunnerEnv, *RunningDaemon) {
	t.Helper()
	cluster := testcluster.Get(t)
	kube := cluster.KubeClient(t)
	InstallRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, ServiceAccount)
	d := StartDaemon(t, cfg, ns, "node-1", t.TempDir(), append([]func(*app.DaemonOptions){ManagerRunner}, opts...)...)
	return &RunnerEnv{
		APIEnv: &APIEnv{ManagerEnv: &ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: LHClient(t, cluster.Config)}, Base: "http://" + d.APIAddress},
		Cfg:    cfg,
	}, d
}

func (e *RunnerEnv) Job(t *testing.T, name string) *longhorn.RecurringJob {
	t.Helper()
	j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (e *RunnerEnv) WaitJob(t *testing.T, name, what string, timeout time.Duration, cond func(*longhorn.RecurringJob) bool) *longhorn.RecurringJob {
	t.Helper()
	var job *longhorn.RecurringJob
	Eventually(t, timeout, what, func() (bool, error) {
		j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		job = j
		return cond(j), nil
	})
	return job
}

// AttachedVolume creates a small volume labelled for job and attaches it
// to the node that holds its replica (the manager that created it).
func (e *RunnerEnv) AttachedVolume(t *testing.T, name, job string) {
	t.Helper()
	e.Call(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/"+name+"?action=recurringJobAdd", `{"name":"`+job+`","isGroup":false}`).Expect(t, 200)
	v := e.WaitVolume(t, name, "created with its replica", func(m map[string]any) bool {
		replicas, _ := m["replicas"].([]any)
		return m["state"] == "detached" && len(replicas) == 1
	})
	node := v["replicas"].([]any)[0].(map[string]any)["hostId"].(string)
	e.Call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"`+node+`"}`).Expect(t, 200)
	e.WaitVolume(t, name, "attached", func(m map[string]any) bool { return m["state"] == "attached" })
}

// TickSnapshots counts the volume's snapshots made for the job's tick.
func (e *RunnerEnv) TickSnapshots(t *testing.T, volume string, tick time.Time) int {
	t.Helper()
	list := e.Call(t, "POST", "/v1/volumes/"+volume+"?action=snapshotList", "").Expect(t, 200)
	n := 0
	for _, item := range list.Body["data"].([]any) {
		labels, _ := item.(map[string]any)["labels"].(map[string]any)
		if labels[types.LabelRecurringJobTick] == tick.UTC().Format("20060102T150405Z") {
			n++
		}
	}
	return n
}

func (e *RunnerEnv) Events(t *testing.T, job, reason string) []string {
	t.Helper()
	list, err := e.Kube.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == job && ev.Reason == reason {
			out = append(out, ev.Message)
		}
	}
	return out
}

// ManagerEnv is a namespace with the manager running in it as its
// ServiceAccount, and admin clients to act as a user.
type ManagerEnv struct {
	Cluster *testcluster.Cluster
	NS      string
	Kube    kubernetes.Interface
	LH      lhclientset.Interface
}

func (e *ManagerEnv) CreateJob(t *testing.T, name string, spec longhorn.RecurringJobSpec) *longhorn.RecurringJob {
	t.Helper()
	job, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Create(context.Background(),
		&longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func (e *ManagerEnv) UpdateJob(t *testing.T, name string, change func(*longhorn.RecurringJob)) {
	t.Helper()
	err := datastore.RetryOnConflict(func() error {
		job, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(job)
		_, err = e.LH.LonghornV1beta2().RecurringJobs(e.NS).Update(context.Background(), job, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *ManagerEnv) SetSetting(t *testing.T, name types.SettingName, value string) {
	t.Helper()
	err := datastore.RetryOnConflict(func() error {
		s, err := e.LH.LonghornV1beta2().Settings(e.NS).Get(context.Background(), string(name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Value = value
		_, err = e.LH.LonghornV1beta2().Settings(e.NS).Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// WaitCronJob waits until the job's CronJob exists and satisfies cond.
func (e *ManagerEnv) WaitCronJob(t *testing.T, name, what string, cond func(*batchv1.CronJob) bool) *batchv1.CronJob {
	t.Helper()
	var cj *batchv1.CronJob
	Eventually(t, 15*time.Second, what, func() (bool, error) {
		var err error
		cj, err = e.Kube.BatchV1().CronJobs(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && cond(cj), nil
	})
	return cj
}

func (e *ManagerEnv) ReadyCondition(t *testing.T, name string) longhorn.Condition {
	t.Helper()
	job, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range job.Status.Conditions {
		if c.Type == longhorn.ConditionTypeReady {
			return c
		}
	}
	return longhorn.Condition{}
}

func (e *ManagerEnv) CreateVolume(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	_, err := e.LH.LonghornV1beta2().Volumes(e.NS).Create(context.Background(), &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 1},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *ManagerEnv) VolumeLabels(t *testing.T, name string) map[string]string {
	t.Helper()
	v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return v.Labels
}

func (e *ManagerEnv) WaitVolumeLabels(t *testing.T, name, what string, cond func(map[string]string) bool) {
	t.Helper()
	Eventually(t, 15*time.Second, what, func() (bool, error) { return cond(e.VolumeLabels(t, name)), nil })
}
