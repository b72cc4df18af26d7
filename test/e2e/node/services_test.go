//go:build e2enode

package node

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// A pod on the pods' network (not the host's) calls the apiserver as the
// manager does, with client-go's in-cluster config: the kubernetes
// Service's cluster IP (through kube-proxy, to the apiserver on the node's
// address), its certificate checked with the token volume's ca.crt. The
// apiserver knows the pod as its ServiceAccount.
func TestInClusterConfigReachesTheAPIServer(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)

	slices, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, p := range s.Ports {
				endpoints = append(endpoints, net.JoinHostPort(strings.Join(e.Addresses, ","), strconv.Itoa(int(*p.Port))))
			}
		}
	}
	if len(endpoints) != 1 || !strings.HasPrefix(endpoints[0], cluster.NodeIP+":") {
		t.Errorf("the kubernetes Service's endpoints are %v, want the node's address %s", endpoints, cluster.NodeIP)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "in-cluster"}}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := testPod("incluster", "incluster")
	pod.Spec.ServiceAccountName = sa.Name
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, client, ns, pod.Name, corev1.PodSucceeded)
	out := strings.TrimSpace(c.Kubectl(t, "", "logs", "-n", ns, pod.Name))
	if want := "system:serviceaccount:" + ns + ":" + sa.Name; out != want {
		t.Errorf("the pod is %q to the apiserver, want %q", out, want)
	}
}

// A pod reaches another pod's Service by its name in the cluster DNS, the
// namespace's short name and <service>.<namespace>, and by its cluster
// IP, all through kube-proxy.
func TestPodReachesAServiceByNameAndClusterIP(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	server := testPod("web-server", "serve", "8080")
	server.Labels = map[string]string{"app": "web"}
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), server, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := createService(t, client, ns, "web", "web", false)
	waitReadyEndpoint(t, client, ns, svc.Name)

	urls := []string{"http://web/", "http://web." + ns + "/", "http://" + svc.Spec.ClusterIP + "/"}
	clientPod := testPod("web-client", append([]string{"fetch"}, urls...)...)
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), clientPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, client, ns, clientPod.Name, corev1.PodSucceeded)
	got := fetched(c.Kubectl(t, "", "logs", "-n", ns, clientPod.Name))
	if len(got) != len(urls) {
		t.Fatalf("the client fetched %q from %v, want the server's name from each", got, urls)
	}
	for i, name := range got {
		if name != server.Name {
			t.Errorf("%s answered %q, want the server pod %q", urls[i], name, server.Name)
		}
	}
}

// The cluster DNS answers for the cluster's names, by the pod's search
// path too, and says that other names do not exist (NXDOMAIN): it forwards
// nothing to the machine's resolvers.
func TestClusterDNSAnswersForTheClusterOnly(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	pod := testPod("lookup", "lookup", "kubernetes.default", "kubernetes.default.svc.cluster.local", "example.com")
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, client, ns, pod.Name, corev1.PodSucceeded)
	got := strings.Split(strings.TrimSpace(c.Kubectl(t, "", "logs", "-n", ns, pod.Name)), "\n")
	want := []string{
		"kubernetes.default " + cluster.KubernetesServiceIP,
		"kubernetes.default.svc.cluster.local " + cluster.KubernetesServiceIP,
		"example.com not-found",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pod resolved %q, want %q", got, want)
	}
}

// A pod reaches its own Service: kube-proxy sends the packet back to the
// pod it came from, over the bridge port's hairpin, as the node (the
// pod would drop a packet from its own address).
func TestPodReachesItsOwnService(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	// The Service's name is not the pod's, which the pod's /etc/hosts maps
	// to its own address.
	pod := testPod("hairpin", "serve", "8080")
	pod.Labels = map[string]string{"app": "hairpin"}
	caller := pod.Spec.Containers[0]
	caller.Name = "caller"
	caller.Command = []string{cluster.ImageBinary, "fetch", "http://self/"}
	pod.Spec.Containers = append(pod.Spec.Containers, caller)
	// The pod is its Service's endpoint whether or not it is Ready: it is
	// not once the caller has exited.
	createService(t, client, ns, "self", "hairpin", true)
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var state *corev1.ContainerStateTerminated
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range got.Status.ContainerStatuses {
			if s.Name == caller.Name && s.State.Terminated != nil {
				state = s.State.Terminated
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the caller container did not finish: %v%s", err, "\n"+c.PodsDiagnosis(client, ns))
	}
	out := fetched(c.Kubectl(t, "", "logs", "-n", ns, pod.Name, "-c", caller.Name))
	if state.ExitCode != 0 || len(out) != 1 || out[0] != pod.Name {
		t.Errorf("the pod fetched its own Service: exit code %d, output %q; want 0 and its name %q", state.ExitCode, out, pod.Name)
	}
}

// fetched are the bodies in the log of testimage fetch, without the lines
// of its tries that failed (its standard error, which the log holds too).
func fetched(log string) []string {
	var bodies []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !strings.HasPrefix(line, "testimage fetch: ") {
			bodies = append(bodies, strings.TrimSpace(line))
		}
	}
	return bodies
}

// createService makes a Service of port 80 to the pods labelled app=app
// on port 8080.
func createService(t *testing.T, client kubernetes.Interface, ns, name, app string, publishNotReady bool) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector:                 map[string]string{"app": app},
			Ports:                    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			PublishNotReadyAddresses: publishNotReady,
		},
	}
	created, err := client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// waitReadyEndpoint waits until the Service has a ready endpoint.
func waitReadyEndpoint(t *testing.T, client kubernetes.Interface, ns, service string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		slices, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Service %s/%s has no ready endpoint: %v%s", ns, service, err, "\n"+cluster.Get(t).PodsDiagnosis(client, ns))
	}
}
