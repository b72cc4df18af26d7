package runner

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/types"
)

// PodRunnerConfig is what the pod runner knows of the daemon.
type PodRunnerConfig struct {
	// Namespace holds the pods: the manager's.
	Namespace string
	// NodeName is the node the pods run on: this daemon's, whose disks
	// they serve.
	NodeName string
	// Image is the image of servers started without one (data sources):
	// the manager image.
	Image string
	// ServiceAccount is the pods' service account.
	ServiceAccount string
	// DataSourcePort and ManagerPort are the ports the servers listen on
	// in their pods; DataSourcePodPort and ManagerPodPort when zero. Tests
	// that run every pod's server on 127.0.0.1 set them apart.
	DataSourcePort, ManagerPort int32
	// Placement, when set, gives the pod settings at each pod's creation:
	// its tolerations, priority class and image pull secret go on the
	// pod. Not its node selector: the pod is bound to its disk's node by
	// name, where a selector could only make it fail. A pod already made
	// keeps what it was made with.
	Placement func() types.PodPlacement
}

// PodRunner is the ServerRunner of a cluster: each server is a pod of the
// manager image on this node, with its disk mounted. Start and Address
// never wait for a pod to run: they say what it waits for, and the
// controller looks again.
type PodRunner struct {
	kube kubernetes.Interface
	cfg  PodRunnerConfig
	log  *logrus.Entry
	// StopTimeout bounds how long Stop waits for a pod to go.
	StopTimeout time.Duration
	// pollInterval is how often Stop looks whether the pod is gone.
	pollInterval time.Duration

	mu sync.Mutex
	// logs holds the last log lines of terminated pods, by UID, so a
	// failed pod's log is read once.
	logs map[k8stypes.UID]string
}

const (
	podCallTimeout    = 10 * time.Second
	podStopTimeout    = 15 * time.Second
	podStopPoll       = 250 * time.Millisecond
	podLogCacheLimit  = 256
	serverPodLogLines = serverLogLines
)

// NewPodRunner runs servers as pods in cfg.Namespace on cfg.NodeName.
func NewPodRunner(log *logrus.Entry, kube kubernetes.Interface, cfg PodRunnerConfig) *PodRunner {
	return &PodRunner{kube: kube, cfg: cfg, log: log, StopTimeout: podStopTimeout, pollInterval: podStopPoll, logs: map[k8stypes.UID]string{}}
}

func (r *PodRunner) pods() podClient { return r.kube.CoreV1().Pods(r.cfg.Namespace) }

type podClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	Create(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) (*corev1.Pod, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

func pendingf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrServerPending, fmt.Sprintf(format, a...))
}

// Start implements ServerRunner: it creates the pod when there is none,
// replaces one that terminated or runs other arguments or another image,
// adopts one that matches, and answers nil once it is running and ready.
// makeDiskFolders creates the disk folders pod mounts, on a disk that is
// there (the runner runs on the disk's node, which has the disk at the
// same path): the kubelet mounts only a folder that exists. A disk that
// is not there is left alone: the pod then fails to mount it, and says
// so, rather than the disk being made again on the root filesystem.
func makeDiskFolders(pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		if _, err := os.Stat(filepath.Dir(v.HostPath.Path)); err != nil {
			continue
		}
		if err := os.MkdirAll(v.HostPath.Path, 0o700); err != nil {
			return err
		}
	}
	return nil
}

func (r *PodRunner) Start(key string, args []string, opts ...ServerOption) error {
	want, err := serverPod(r.cfg, key, args, serverOptions(opts))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), podCallTimeout)
	defer cancel()
	log := r.log.WithFields(logrus.Fields{"server": key, "pod": want.Name, "image": want.Spec.Containers[0].Image})
	pod, err := r.pods().Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if err := makeDiskFolders(want); err != nil {
			return fmt.Errorf("server %s: %w", key, err)
		}
		if _, err := r.pods().Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create pod %s for server %s: %w", want.Name, key, err)
		}
		log.WithField("node", r.cfg.NodeName).Info("Created the backing image server pod")
		return pendingf("pod %s created on node %s, waiting for it to run", want.Name, r.cfg.NodeName)
	}
	if err != nil {
		return fmt.Errorf("get pod %s of server %s: %w", want.Name, key, err)
	}
	if pod.DeletionTimestamp != nil {
		return pendingf("waiting for the old pod %s to be deleted", pod.Name)
	}
	replace := ""
	switch {
	case pod.Annotations[types.AnnotationServerSpec] != want.Annotations[types.AnnotationServerSpec]:
		replace = "it runs other arguments or another image"
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		replace = "it terminated: " + terminationReason(pod)
	}
	if replace != "" {
		if err := r.pods().Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s of server %s: %w", pod.Name, key, err)
		}
		r.forgetLog(pod.UID)
		log.WithField("reason", replace).Info("Deleted the backing image server pod to replace it")
		return pendingf("replacing pod %s: %s", pod.Name, replace)
	}
	if _, why := podAddress(pod); why != "" {
		return pendingf("%s", why)
	}
	return nil
}

// Address implements ServerRunner.
func (r *PodRunner) Address(key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), podCallTimeout)
	defer cancel()
	name := ServerPodName(key)
	pod, err := r.pods().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", ErrServerNotStarted
	}
	if err != nil {
		return "", fmt.Errorf("get pod %s of server %s: %w", name, key, err)
	}
	if pod.DeletionTimestamp != nil {
		return "", pendingf("pod %s is being deleted", name)
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return "", fmt.Errorf("server %s: pod %s terminated: %s%s", key, name, terminationReason(pod), r.lastLog(ctx, pod))
	}
	addr, why := podAddress(pod)
	if why != "" {
		return "", pendingf("%s", why)
	}
	return addr, nil
}

// Stop implements ServerRunner: it deletes the pod and waits, at most
// StopTimeout, for it to go (the kubelet stops the container first).
func (r *PodRunner) Stop(key string) {
	name := ServerPodName(key)
	log := r.log.WithFields(logrus.Fields{"server": key, "pod": name})
	ctx, cancel := context.WithTimeout(context.Background(), r.StopTimeout)
	defer cancel()
	pod, err := r.pods().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		log.WithError(err).Warn("Cannot read the backing image server pod to stop it")
		return
	}
	if pod.DeletionTimestamp == nil {
		err := r.pods().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return
		}
		if err != nil {
			log.WithError(err).Warn("Cannot delete the backing image server pod")
			return
		}
	}
	r.forgetLog(pod.UID)
	for {
		cur, err := r.pods().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != pod.UID) {
			log.Info("Stopped the backing image server pod")
			return
		}
		select {
		case <-ctx.Done():
			log.WithField("timeout", r.StopTimeout).Warn("The backing image server pod is still terminating")
			return
		case <-time.After(r.pollInterval):
		}
	}
}

// podAddress is the pod's podIP:port once it is running and ready, or
// else what it waits for.
func podAddress(pod *corev1.Pod) (string, string) {
	var port int32
	if cs := pod.Spec.Containers; len(cs) > 0 && len(cs[0].Ports) > 0 {
		port = cs[0].Ports[0].ContainerPort
	}
	ready := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if pod.Status.Phase == corev1.PodRunning && ready && pod.Status.PodIP != "" && port > 0 {
		return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port))), ""
	}
	return "", fmt.Sprintf("pod %s is %s", pod.Name, pendingReason(pod))
}

// pendingReason says what a pod that does not serve yet waits for.
func pendingReason(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("Pending: unschedulable: %s %s", c.Reason, c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			why := fmt.Sprintf("%s: container waiting: %s", phaseOf(pod), w.Reason)
			if w.Message != "" {
				why += ": " + w.Message
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				why += fmt.Sprintf(" (last exit code %d, %s)", t.ExitCode, t.Reason)
			}
			return why
		}
	}
	switch {
	case pod.Status.Phase == "" || (pod.Status.Phase == corev1.PodPending && len(pod.Status.ContainerStatuses) == 0):
		return fmt.Sprintf("Pending: waiting for the kubelet of node %s to start it", pod.Spec.NodeName)
	case pod.Status.Phase == corev1.PodRunning:
		return "Running, not ready yet: waiting for its server to listen (readiness probe)"
	}
	return string(pod.Status.Phase)
}

func phaseOf(pod *corev1.Pod) string {
	if pod.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(pod.Status.Phase)
}

// terminationReason is the exit code and reason of a terminated pod's
// server container.
func terminationReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			why := fmt.Sprintf("exit code %d", t.ExitCode)
			if t.Reason != "" {
				why += ", " + t.Reason
			}
			if t.Message != "" {
				why += ": " + t.Message
			}
			return why
		}
	}
	why := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		why += ", " + pod.Status.Reason
	}
	if pod.Status.Message != "" {
		why += ": " + pod.Status.Message
	}
	return why
}

// lastLog is "; last log lines: ..." of a terminated pod, read once (the
// pods/log right), or "" when it cannot be read.
func (r *PodRunner) lastLog(ctx context.Context, pod *corev1.Pod) string {
	r.mu.Lock()
	text, ok := r.logs[pod.UID]
	r.mu.Unlock()
	if !ok {
		raw, err := r.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: serverContainer, TailLines: ptr.To[int64](serverPodLogLines)}).DoRaw(ctx)
		if err != nil {
			r.log.WithFields(logrus.Fields{"pod": pod.Name}).WithError(err).Debug("Cannot read the log of the terminated backing image server pod")
		} else {
			text = strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(raw)), "\n", " | ")), " ")
		}
		r.mu.Lock()
		if len(r.logs) >= podLogCacheLimit {
			clear(r.logs)
		}
		r.logs[pod.UID] = text
		r.mu.Unlock()
	}
	if text == "" {
		return ""
	}
	return "; last log lines: " + text
}

func (r *PodRunner) forgetLog(uid k8stypes.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.logs, uid)
}
