//go:build e2enode

package install

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// checkTenantRefused runs a pod in a namespace of its own, as a tenant of
// the cluster would, that calls the manager's API through the
// longhorn-backend Service with its own account's tokens: the pod's
// default one (for the apiserver, so no credential at the API, whose
// audience is longhorn-manager) and one it projected for the API's
// audience itself (its account holds no Longhorn right). The API refuses
// both: 401 and 403. Without a token it is 401 too, and by a name it was
// not told of, 421.
func checkTenantRefused(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	client := c.KubeClient(t)
	const ns = "tenant"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServiceAccount(t, c, ns, "default")
	svc, err := client.CoreV1().Services(namespace).Get(ctx, "longhorn-backend", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// By the Service's address: the API answers IP addresses and the names
	// it is told of (--manager-url's, --api-allowed-hosts), and refuses any
	// other Host (421), against DNS rebinding: longhorn-backend.longhorn-system
	// from another namespace is one.
	url := "https://" + svc.Spec.ClusterIP + ":9500/v1/volumes"
	byName := "https://longhorn-backend.longhorn-system:9500/v1/volumes"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "curious"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes: []corev1.Volume{{Name: "api-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: "longhorn-manager", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}}},
			}}}},
		},
	}
	// One container per question, each printing the status code.
	questions := map[string][]string{
		"no-token":      {url},
		"default-token": {url, "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		"api-token":     {url, "/api/token"},
		"by-name":       {byName, "/api/token"},
	}
	want := map[string]string{"no-token": "401", "default-token": "401", "api-token": "403", "by-name": "421"}
	for name, args := range questions {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: name, Image: cluster.Image, ImagePullPolicy: corev1.PullNever,
			Command:      append([]string{cluster.ImageBinary, "status"}, args...),
			VolumeMounts: []corev1.VolumeMount{{Name: "api-token", MountPath: "/api"}},
		})
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tenant's pod done", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		got, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed, string(got.Status.Phase), nil
	}, func() string { return c.PodsDiagnosis(client, ns) })
	for name, code := range want {
		out, err := c.TryKubectl("", "-n", ns, "logs", pod.Name, "-c", name)
		if err != nil || strings.TrimSpace(out) != code {
			t.Errorf("a tenant's pod asking the API with %s: %q (%v), want %s", name, strings.TrimSpace(out), err, code)
		}
	}
}

// waitServiceAccount waits for the ServiceAccount controller to make a
// namespace's account, which a pod needs before it is admitted.
func waitServiceAccount(t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	client := c.KubeClient(t)
	waitFor(t, "ServiceAccount "+ns+"/"+name, time.Minute, func(ctx context.Context) (bool, string, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, "", nil
	}, nil)
}
