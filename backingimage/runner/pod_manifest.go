package runner

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/types"
)

// The pods of backing image servers: one per data source, one per disk's
// manager, on the node of the disk, with the disk's folders they use
// mounted at their own paths so the server's flags are the same as a
// child process's.
const (
	// Each server listens on a fixed port of its pod's IP: the ports the
	// servers default to.
	DataSourcePodPort = 8001
	ManagerPodPort    = 8000

	serverContainer              = "server"
	serverPodTerminationGrace    = 10
	serverReadinessPeriodSeconds = 2
	dataSourceSubcommand         = "backing-image-data-source"
	managerSubcommand            = "backing-image-manager"
	serverPodNameMaxLen          = validation.DNS1123LabelMaxLength
	serverPodNameHashLen         = 10
	serverTLSVolume              = "internal-tls"
	// ServerTLSMountPath is where a server pod reads its leaf: the
	// servers' Secret (mtls.ServerSecretName), which the kubelet keeps
	// current when the manager renews it.
	ServerTLSMountPath            = "/var/lib/longhorn-internal-tls"
	serverPodManagerBinary        = "longhorn-manager"
	serverPodInvalidNameCharsExpr = `[^a-z0-9-]+`
)

var serverPodInvalidNameChars = regexp.MustCompile(serverPodInvalidNameCharsExpr)

// ServerPodName is the pod of the server under key: the key made a DNS
// label, shortened with a hash of the key when too long. The same key
// always gives the same name, so a restarted daemon finds its pods.
func ServerPodName(key string) string {
	name := strings.Trim(serverPodInvalidNameChars.ReplaceAllString(strings.ToLower(key), "-"), "-")
	if len(name) <= serverPodNameMaxLen && name == strings.ReplaceAll(key, "/", "-") {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	hash := hex.EncodeToString(sum[:])[:serverPodNameHashLen]
	if len(name) > serverPodNameMaxLen-serverPodNameHashLen-1 {
		name = strings.TrimRight(name[:serverPodNameMaxLen-serverPodNameHashLen-1], "-")
	}
	return name + "-" + hash
}

// flagValue is the value of --name in args (as `--name value`).
func flagValue(args []string, name string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--"+name {
			return args[i+1]
		}
	}
	return ""
}

// serverDiskFolders are the folders of the disk a server of subcommand
// sees, each mounted at its own path so the server's flags are a child
// process's: the backing images' files and their temporary folder,
// read-write, and, for a disk's manager, the replicas' folder read-only
// (it reads which replicas start from a file before deleting it). Never
// the replicas' data writable, nor the rest of the disk: a data source
// fetches untrusted URLs. The folders are of type Directory, never
// DirectoryOrCreate: a disk that is gone is not made again on the root
// filesystem (the runner creates them on a disk that is there).
func serverDiskFolders(subcommand, diskPath string) ([]corev1.VolumeMount, []corev1.Volume) {
	folders := []struct {
		name, sub string
		readOnly  bool
	}{{"disk-images", backingimage.FilesFolder, false}, {"disk-tmp", backingimage.TempFolder, false}}
	if subcommand == managerSubcommand {
		folders = append(folders, struct {
			name, sub string
			readOnly  bool
		}{"disk-replicas", replica.ReplicasFolder, true})
	}
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	for _, f := range folders {
		path := filepath.Join(diskPath, f.sub)
		mounts = append(mounts, corev1.VolumeMount{Name: f.name, MountPath: path, ReadOnly: f.readOnly})
		volumes = append(volumes, corev1.Volume{Name: f.name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(corev1.HostPathDirectory)}}})
	}
	return mounts, volumes
}

// serverPod is the pod that runs `longhorn-manager <args> --listen
// 0.0.0.0:<port>` on node from image, for the server under key.
func serverPod(cfg PodRunnerConfig, key string, args []string, o ServerOptions) (*corev1.Pod, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("server %s: no subcommand to run", key)
	}
	var port int32
	restart := corev1.RestartPolicyNever
	switch args[0] {
	case dataSourceSubcommand:
		// A data source that fails is restarted by its controller, with a
		// backoff and a fresh temporary folder: the kubelet must not.
		port = cmp.Or(cfg.DataSourcePort, DataSourcePodPort)
	case managerSubcommand:
		// A manager keeps no state of its own beyond the disk: the kubelet
		// may restart it in place.
		port, restart = cmp.Or(cfg.ManagerPort, ManagerPodPort), corev1.RestartPolicyAlways
	default:
		return nil, fmt.Errorf("server %s: unknown subcommand %q (want %s or %s)", key, args[0], dataSourceSubcommand, managerSubcommand)
	}
	diskPath := flagValue(args, "disk-path")
	if diskPath == "" || !filepath.IsAbs(diskPath) {
		return nil, fmt.Errorf("server %s: --disk-path must be an absolute path, got %q", key, diskPath)
	}
	image := o.Image
	if image == "" {
		image = cfg.Image
	}
	if image == "" {
		return nil, fmt.Errorf("server %s: no image to run it from", key)
	}
	if cfg.NodeName == "" || cfg.Namespace == "" {
		return nil, fmt.Errorf("server %s: the pod runner needs a node and a namespace", key)
	}
	labels := map[string]string{types.LabelComponent: args[0], types.LabelManagedBy: types.ManagedByValue}
	for label, value := range map[string]string{types.LabelServerPodNode: cfg.NodeName, types.LabelDiskUUID: flagValue(args, "disk-uuid")} {
		if value != "" && len(validation.IsValidLabelValue(value)) == 0 {
			labels[label] = value
		}
	}
	if args[0] == dataSourceSubcommand {
		if bi := flagValue(args, "name"); bi != "" && len(validation.IsValidLabelValue(bi)) == 0 {
			labels[types.LabelBackingImage] = bi
		}
	}
	fullArgs := append(append([]string{}, args...), "--listen", "0.0.0.0:"+strconv.Itoa(int(port)), "--tls-dir", ServerTLSMountPath)
	diskMounts, diskVolumes := serverDiskFolders(args[0], diskPath)
	// A data source holds a leaf of its narrow role, which the engines
	// answer only an export's reads.
	tlsSecret := mtls.ServerSecretName
	if args[0] == dataSourceSubcommand {
		tlsSecret = mtls.DataSourceSecretName
	}
	// The mounts are part of the spec: a pod of an older layout (the
	// whole disk mounted) is replaced.
	spec, _ := json.Marshal(struct {
		Image     string
		Args      []string
		Mounts    []corev1.VolumeMount `json:",omitempty"`
		TLSSecret string               `json:",omitempty"`
	}{image, fullArgs, diskMounts, tlsSecret})
	sum := sha256.Sum256(spec)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ServerPodName(key),
			Namespace:   cfg.Namespace,
			Labels:      labels,
			Annotations: map[string]string{types.AnnotationServerSpec: hex.EncodeToString(sum[:16])},
		},
		Spec: corev1.PodSpec{
			// Placed by name: the disk is on this node, so no scheduler.
			NodeName:           cfg.NodeName,
			RestartPolicy:      restart,
			ServiceAccountName: cfg.ServiceAccount,
			// The servers never call the Kubernetes API.
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](serverPodTerminationGrace),
			Containers: []corev1.Container{{
				Name:            serverContainer,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{serverPodManagerBinary, "--log-json"},
				Args:            fullArgs,
				Ports:           []corev1.ContainerPort{{Name: "server", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
					PeriodSeconds: serverReadinessPeriodSeconds,
				},
				// Not privileged, unlike Longhorn's: the servers only read
				// and write files under the disk's folders they use, as the
				// image's user (root), and touch no device.
				VolumeMounts: append(diskMounts, corev1.VolumeMount{Name: serverTLSVolume, MountPath: ServerTLSMountPath, ReadOnly: true}),
			}},
			Volumes: append(diskVolumes, corev1.Volume{
				Name: serverTLSVolume,
				// The key is readable by the server's user only.
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tlsSecret, DefaultMode: ptr.To[int32](0o400)}},
			}),
		},
	}
	if o.Owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*o.Owner}
	}
	if cfg.Placement != nil {
		// Outside the spec hash: a settings change does not replace
		// running servers.
		p := cfg.Placement()
		pod.Spec.Tolerations = p.Tolerations
		pod.Spec.PriorityClassName = p.PriorityClassName
		pod.Spec.ImagePullSecrets = p.ImagePullSecrets()
	}
	return pod, nil
}
