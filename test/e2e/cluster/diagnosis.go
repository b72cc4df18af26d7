package cluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PodsDiagnosis says what is wrong in namespace ns, for a test's failure:
// each pod that is not ready, its containers' states and the last lines of
// their logs, then the namespace's Warning events.
func (c *Cluster) PodsDiagnosis(client kubernetes.Interface, ns string) string {
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return "list pods: " + err.Error()
	}
	var b strings.Builder
	for _, pod := range pods.Items {
		if PodReady(&pod) {
			continue
		}
		fmt.Fprintf(&b, "pod %s/%s on node %q: %s %s\n", ns, pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.Message)
		for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
			state := "running"
			if w := cs.State.Waiting; w != nil {
				state = "waiting: " + w.Reason + " " + w.Message
			} else if term := cs.State.Terminated; term != nil {
				state = fmt.Sprintf("terminated %d: %s %s", term.ExitCode, term.Reason, term.Message)
			}
			fmt.Fprintf(&b, "  %s (ready %v, restarts %d): %s\n", cs.Name, cs.Ready, cs.RestartCount, state)
			if out, err := c.TryKubectl("", "logs", "-n", ns, pod.Name, "-c", cs.Name, "--tail=15"); err == nil && strings.TrimSpace(out) != "" {
				fmt.Fprintf(&b, "    %s\n", strings.ReplaceAll(strings.TrimSpace(out), "\n", "\n    "))
			}
		}
	}
	events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "event %s %s: %s %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}

// PodReady says whether the pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
