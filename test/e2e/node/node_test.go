//go:build e2enode

package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// A pod of the local image runs to completion on the node, on the pods'
// bridge network, and its log comes back through `kubectl logs` (the
// apiserver reaching the kubelet at the node's address).
func TestPodRunsToCompletion(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	pod := testPod("hello", "echo", "hello from the node")
	pod, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod = waitPodPhase(t, client, ns, pod.Name, corev1.PodSucceeded)
	_, subnet, _ := net.ParseCIDR(cluster.PodSubnet)
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !subnet.Contains(ip) {
		t.Errorf("pod IP %q: want an address of the bridge's subnet %s", pod.Status.PodIP, cluster.PodSubnet)
	}
	if pod.Spec.NodeName != cluster.NodeName {
		t.Errorf("pod ran on %q, want %q", pod.Spec.NodeName, cluster.NodeName)
	}
	out := c.Kubectl(t, "", "logs", "-n", ns, pod.Name)
	if strings.TrimSpace(out) != "hello from the node" {
		t.Errorf("kubectl logs: %q, want %q", out, "hello from the node")
	}
}

// The DaemonSet controller makes the node's pod, the scheduler's pod is
// bound to the node, and the kubelet's readiness probe marks it Ready.
func TestDaemonSetPodReady(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	labels := map[string]string{"app": "node-test"}
	template := testPod("", "sleep", "3600")
	template.Labels = labels
	template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cluster.ImageBinary, "true"}}},
		PeriodSeconds: 1,
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "node-test"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec},
		},
	}
	if _, err := client.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var status appsv1.DaemonSetStatus
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().DaemonSets(ns).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = got.Status
		return status.DesiredNumberScheduled == 1 && status.NumberReady == 1, nil
	})
	if err != nil {
		t.Fatalf("DaemonSet not Ready on the node: status %+v: %v%s", status, err, "\n"+c.PodsDiagnosis(client, ns))
	}
}

// The CronJob controller makes a Job on schedule, the Job controller its
// pod, and the pod runs to completion on the node.
func TestCronJobPodRuns(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	pod := testPod("", "echo", "cron ran")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "node-test"},
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: pod.Spec},
			}},
		},
	}
	if _, err := client.BatchV1().CronJobs(ns).Create(context.Background(), cj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first run is at the next whole minute.
	var jobs []string
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		jobs = jobs[:0]
		for _, job := range list.Items {
			jobs = append(jobs, fmt.Sprintf("%s succeeded=%d failed=%d", job.Name, job.Status.Succeeded, job.Status.Failed))
			if job.Status.Succeeded > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Job of the CronJob succeeded: jobs %v: %v%s", jobs, err, "\n"+c.PodsDiagnosis(client, ns))
	}
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			out := c.Kubectl(t, "", "logs", "-n", ns, p.Name)
			if strings.TrimSpace(out) != "cron ran" {
				t.Errorf("the CronJob's pod %s logged %q, want %q", p.Name, out, "cron ran")
			}
			return
		}
	}
	t.Errorf("the Job succeeded but no Succeeded pod is left to read the log of%s", "\n"+c.PodsDiagnosis(client, ns))
}

// The ServiceAccount admission plugin mounts the pod's account token, the
// kubelet gets it signed (TokenRequest), and the apiserver takes it: the
// pod asks who it is and is told its account. The pod is on the host's
// network and calls the kubeconfig's address (127.0.0.1), which the
// apiserver's certificate names; pods on the pods' network call it through
// the kubernetes Service (services_test.go).
func TestServiceAccountTokenWorks(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prober"}}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := testPod("whoami", "whoami", c.Config.Host)
	pod.Spec.ServiceAccountName = sa.Name
	pod.Spec.HostNetwork = true
	created, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTokenVolume(created) {
		t.Fatalf("the ServiceAccount admission plugin put no token volume in the pod: volumes %+v", created.Spec.Volumes)
	}
	waitPodPhase(t, client, ns, pod.Name, corev1.PodSucceeded)
	out := c.Kubectl(t, "", "logs", "-n", ns, pod.Name)
	want := "system:serviceaccount:" + ns + ":" + sa.Name
	if strings.TrimSpace(out) != want {
		t.Errorf("the pod's token is %q to the apiserver, want %q", strings.TrimSpace(out), want)
	}
	if u, err := url.Parse(c.Config.Host); err != nil || u.Hostname() != "127.0.0.1" {
		t.Errorf("the apiserver is at %s, want 127.0.0.1 only", c.Config.Host)
	}
}

// The kubelet's API, on the bridge's address that every pod reaches,
// takes no anonymous request and asks the apiserver about a token's
// rights: a tenant's account may not list the node's pods (nor exec into
// them); the apiserver's own client certificate may (kubectl logs, above).
func TestKubeletRefusesAnonymousAndTenants(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	kubeletURL := "https://" + net.JoinHostPort(cluster.NodeIP, "10250") + "/pods"
	if code := kubeletStatus(t, kubeletURL, ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous GET %s: %d, want 401", kubeletURL, code)
	}
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code := kubeletStatus(t, kubeletURL, tr.Status.Token); code != http.StatusForbidden {
		t.Errorf("GET %s as %s's default account: %d, want 403", kubeletURL, ns, code)
	}
}

func kubeletStatus(t *testing.T, url, token string) int {
	t.Helper()
	// The kubelet's serving certificate is its own, self-signed: this
	// checks who may call it, not who it is.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func testPod(name string, args ...string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           cluster.Image,
				ImagePullPolicy: corev1.PullNever,
				Command:         append([]string{cluster.ImageBinary}, args...),
			}},
		},
	}
}

func hasTokenVolume(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return false
}

// newNamespace makes a namespace for the test and waits for what its pods
// need: the "default" account (the ServiceAccount admission plugin refuses
// pods until the controller has made it) and the kube-root-ca.crt
// ConfigMap of their token volume.
func newNamespace(t *testing.T, c *cluster.Cluster, client kubernetes.Interface) string {
	t.Helper()
	ns := c.NewPlainNamespace(t)
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		if _, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: no default ServiceAccount or kube-root-ca.crt: %v", ns, err)
	}
	return ns
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func waitPodPhase(t *testing.T, client kubernetes.Interface, ns, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pod.Status.Phase == corev1.PodFailed && phase != corev1.PodFailed {
			return false, fmt.Errorf("pod failed: %+v", pod.Status.ContainerStatuses)
		}
		return pod.Status.Phase == phase, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not %s: %v%s", ns, name, phase, err, "\n"+cluster.Get(t).PodsDiagnosis(client, ns))
	}
	return pod
}
