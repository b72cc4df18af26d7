package instancemanager

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/mtls"
)

// The pod serves the node's replicas on its own IP at ReplicaPort, with
// the component leaf of the servers' Secret, mounted read-only and
// readable by root alone; nothing else of the manager's identity is in it.
func TestThePodServesTheNodesReplicasOverMutualTLS(t *testing.T) {
	im := newObject(testConfig, testConfig.Image)
	pod := podFor(testConfig, im, ppEmpty)
	c := pod.Spec.Containers[0]

	if !slices.Contains(c.Command, "--replica-address=[$(POD_IP)]:8502") || !slices.Contains(c.Command, "--tls-dir="+TLSMountPath) {
		t.Fatalf("command %v: want the replica address on the pod's IP and the TLS folder", c.Command)
	}
	if !ServesReplicas(pod) {
		t.Fatal("ServesReplicas of a new pod is false")
	}
	// $(POD_IP) is expanded from the pod's status, declared before use.
	var podIP *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "POD_IP" {
			podIP = &c.Env[i]
		}
	}
	if podIP == nil || podIP.ValueFrom == nil || podIP.ValueFrom.FieldRef == nil || podIP.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Fatalf("env %+v: want POD_IP from status.podIP", c.Env)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != ReplicaPort || c.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Fatalf("ports %+v: want the replica port", c.Ports)
	}
	// On the pod network: each instance manager pod of a node (two while
	// an upgrade rolls) has its own IP, and the NBD exports stay on its
	// own loopback.
	if pod.Spec.HostNetwork || !slices.Contains(c.Command, "--frontend-address=127.0.0.1") {
		t.Fatalf("hostNetwork %v, command %v", pod.Spec.HostNetwork, c.Command)
	}

	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == TLSMountPath {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly {
		t.Fatalf("mounts %+v: want the TLS folder read-only", c.VolumeMounts)
	}
	var secret *corev1.SecretVolumeSource
	for _, v := range pod.Spec.Volumes {
		if v.Name == mount.Name {
			secret = v.Secret
		}
	}
	if secret == nil || secret.SecretName != mtls.ServerSecretName || secret.DefaultMode == nil || *secret.DefaultMode != 0o400 ||
		(secret.Optional != nil && *secret.Optional) {
		t.Fatalf("TLS volume %+v: want Secret %s, mode 0400, not optional (no pod serves without it)", secret, mtls.ServerSecretName)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName != mtls.ServerSecretName {
			t.Fatalf("the pod mounts Secret %s too", v.Secret.SecretName)
		}
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Fatal("the pod gets an account token")
	}
}

// A running pod of the manager's image made before instance managers
// served replicas is kept, as its engines run on; the keeper says once why
// it serves none.
func TestARunningPodWithoutTheReplicaServerIsKeptAndSaidSo(t *testing.T) {
	mine := newObject(testConfig, testConfig.Image)
	k, kube, _ := newTestKeeper(mine)
	log, hook := test.NewNullLogger()
	k.log = logrus.NewEntry(log)
	ctx := context.Background()
	pod := podFor(testConfig, mine, ppEmpty)
	c := &pod.Spec.Containers[0]
	c.Command = slices.DeleteFunc(c.Command, func(a string) bool {
		return strings.HasPrefix(a, "--replica-address=") || strings.HasPrefix(a, "--tls-dir=")
	})
	if ServesReplicas(pod) {
		t.Fatal("ServesReplicas of a pod without --replica-address")
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPhase(t, kube, pod.Name, corev1.PodRunning)
	for range 2 {
		if _, err := k.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil || ServesReplicas(got) {
		t.Fatalf("the running pod was replaced or changed: %v", err)
	}
	warned := 0
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "serves none") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("warned %d times, want once", warned)
	}
}
