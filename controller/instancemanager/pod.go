package instancemanager

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Labels of the instance managers' objects and pods.
const (
	LabelComponent = "longhorn.io/component"
	ComponentValue = "instance-manager"
	LabelNode      = "longhorn.io/node"
	LabelName      = "longhorn.io/instance-manager"
	containerName  = "instance-manager"
)

// The replica server of each instance manager pod (docs/data-plane.md,
// "Where a volume attaches"): the node's replicas, served over the
// replica protocol to the engines of other nodes' instance managers.
const (
	// ReplicaPort is its port on the pod's own IP. 8502: the manager's
	// pod has 9500 to 9502 and the CSI plugin 9808, the backing image
	// servers 8000 and 8001, and Longhorn's instance manager 8500 (its
	// process manager) and 8501 (its proxy). Each instance manager pod has
	// an IP of its own, so two of one node (an upgrade) never share it.
	ReplicaPort = 8502
	// TLSMountPath is where the pod reads its mutual-TLS leaf, of the
	// component role: the Secret mtls.ServerSecretName, which the
	// backing image servers mount too and the kubelet keeps current as
	// the manager renews it (the instance manager reads it again within
	// 30 s). The replica protocol answers only a component's leaf.
	TLSMountPath = "/var/lib/longhorn-internal-tls"
	tlsVolume    = "internal-tls"
	// replicaAddressFlag is the instance manager's flag of its replica
	// server's address. The IP is bracketed, as an IPv6 pod IP needs to
	// be; Go takes an IPv4 one so as well.
	replicaAddressFlag = "--replica-address="
)

// The pod's memory (docs/data-plane.md, "Where the engines run"): 47 MiB
// idle and 57 MiB with 100 engines of 30 snapshots attached
// (docs/benchmarks.md, "The instance manager"), plus one request's buffer
// per NBD connection as its clients write (at most 32 MiB, NBD's largest
// request here): the limit leaves room for 100 attached volumes writing
// 8 MiB at a time; Go's collector works to stay under GOMEMLIMIT before
// the kernel's limit is met.
const (
	memoryRequest = "64Mi"
	memoryLimit   = "1Gi"
	goMemLimit    = "900MiB"
	// terminationGrace is how long the kubelet waits, after SIGTERM (a
	// delete), for the instance manager to stop its engines, syncing
	// their replicas.
	terminationGrace = 30
)

// Name is the name of the instance manager of node and image, and of its
// pod: Longhorn's form, instance-manager-<hash>, one per node and image.
func Name(node, image string) string {
	sum := sha256.Sum256([]byte(node + "/" + image + "/" + string(longhorn.InstanceManagerTypeAllInOne)))
	return "instance-manager-" + hex.EncodeToString(sum[:])[:32]
}

// Root is the folder of the node's instance managers under its data
// folder: the CSI Node service's --instance-manager-dir.
func Root(dataDir string) string { return filepath.Join(dataDir, "instance-manager") }

// Dir is the folder of the instance manager named name: its socket, pid
// file, lock and device records. Each instance manager of a node (one per
// image, two while an upgrade rolls) has its own. It is the same path on
// the host, in the manager's pod, in the CSI plugin's and in the instance
// manager's.
func Dir(dataDir, name string) string {
	return filepath.Join(Root(dataDir), instancemanager.FolderName(name))
}

// dirFlag is the instance manager's flag that names its folder.
const dirFlag = "--dir="

// DirOf is the folder the instance manager of pod serves in, as its
// command says: a pod made by a manager of another version may name
// another than Dir.
func DirOf(pod *corev1.Pod, dataDir string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name != containerName {
			continue
		}
		for _, arg := range c.Command {
			if dir, ok := strings.CutPrefix(arg, dirFlag); ok && filepath.IsAbs(dir) {
				return filepath.Clean(dir)
			}
		}
	}
	return Dir(dataDir, pod.Name)
}

// ServesReplicas says whether pod's instance manager serves the node's
// replicas: a pod made by a manager before they did (of the same image, a
// rebuilt tag) serves none until it is made again.
func ServesReplicas(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name != containerName {
			continue
		}
		for _, arg := range c.Command {
			if strings.HasPrefix(arg, replicaAddressFlag) {
				return true
			}
		}
	}
	return false
}

// newObject is the node's InstanceManager of image.
func newObject(cfg Config, image string) *longhorn.InstanceManager {
	name := Name(cfg.NodeID, image)
	return &longhorn.InstanceManager{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cfg.Namespace, Labels: map[string]string{
			LabelComponent: ComponentValue, LabelNode: cfg.NodeID, LabelName: name}},
		Spec: longhorn.InstanceManagerSpec{Image: image, NodeID: cfg.NodeID,
			Type: longhorn.InstanceManagerTypeAllInOne, DataEngine: longhorn.DataEngineTypeV1},
	}
}

// podFor is the pod of im. Privileged: its engines' devices are FUSE
// mounts (nbdfuse) and loop devices, made from the host's /dev. Not on
// the host's network: the volumes' NBD exports listen on the pod's own
// 127.0.0.1 and nothing else reaches them (NBD has no authentication).
// No account token: it calls no API. The node's data folder is mounted at
// its host path, as in the manager's pod, so the replicas' folders the
// manager names are the same paths in here.
func podFor(cfg Config, im *longhorn.InstanceManager, placement types.PodPlacement) *corev1.Pod {
	hostPathDir := corev1.HostPathDirectory
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: im.Name, Namespace: im.Namespace,
			Labels: map[string]string{LabelComponent: ComponentValue, LabelNode: im.Spec.NodeID, LabelName: im.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "InstanceManager",
				Name: im.Name, UID: im.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName: im.Spec.NodeID,
			// The kubelet starts the container again when it dies, at
			// once and on the same folder; the manager adopts what runs.
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(terminationGrace)),
			Tolerations:                   placement.Tolerations,
			PriorityClassName:             placement.PriorityClassName,
			ImagePullSecrets:              placement.ImagePullSecrets(),
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           im.Spec.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"longhorn-manager", "--log-json", "instance-manager",
					dirFlag + Dir(cfg.DataDir, im.Name), "--frontend-address=127.0.0.1",
					replicaAddressFlag + "[$(POD_IP)]:" + strconv.Itoa(ReplicaPort), "--tls-dir=" + TLSMountPath},
				Env: []corev1.EnvVar{
					{Name: "GOMEMLIMIT", Value: goMemLimit},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				},
				Ports: []corev1.ContainerPort{{Name: "replica", ContainerPort: ReplicaPort, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memoryRequest)},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memoryLimit)},
				},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "longhorn-disk", MountPath: cfg.DataDir},
					{Name: "host-dev", MountPath: "/dev"},
					{Name: tlsVolume, MountPath: TLSMountPath, ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "longhorn-disk", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: cfg.DataDir, Type: &hostPathDir}}},
				{Name: "host-dev", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/dev"}}},
				{Name: tlsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: mtls.ServerSecretName, DefaultMode: ptr.To(int32(0o400))}}},
			},
		},
	}
}

// podState is what an instance manager's pod says of it, and why when it
// does not run.
func podState(pod *corev1.Pod) (longhorn.InstanceManagerState, string) {
	switch {
	case pod == nil:
		return longhorn.InstanceManagerStateStopped, "it has no pod"
	case pod.DeletionTimestamp != nil:
		return longhorn.InstanceManagerStateStopped, fmt.Sprintf("its pod %s is being deleted", pod.Name)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return longhorn.InstanceManagerStateError, fmt.Sprintf("its pod %s ended (%s)", pod.Name, pod.Status.Phase)
	case pod.Status.Phase == corev1.PodRunning:
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				return longhorn.InstanceManagerStateError, fmt.Sprintf("its container waits to start again: %s %s (restarted %d times)", w.Reason, w.Message, cs.RestartCount)
			}
		}
		return longhorn.InstanceManagerStateStarting, fmt.Sprintf("its pod %s runs; its socket does not answer yet", pod.Name)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return longhorn.InstanceManagerStateStarting, fmt.Sprintf("its pod %s is pending: %s %s", pod.Name, w.Reason, w.Message)
		}
	}
	return longhorn.InstanceManagerStateStarting, fmt.Sprintf("its pod %s is pending on node %s", pod.Name, pod.Spec.NodeName)
}

// mayHost says whether a pod may run engines: a pod whose container has
// started, until it is deleted or ends. Such an instance manager is never
// replaced by the manager while it hosts engines.
func mayHost(pod *corev1.Pod) bool {
	return pod != nil && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning
}
