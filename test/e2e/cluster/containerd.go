package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerdConfig is containerd's configuration: every path of its own
// under the data folder, never the machine's /var/lib/containerd or
// /run/containerd (containerd's shims alone put their sockets in
// /run/containerd/s, named by a hash of this socket's path); the pods'
// network namespaces are mounted under its state folder. runc may not
// lower a process's oom_score_adj on this machine, hence
// restrict_oom_score_adj. The sandbox image is the local Image: nothing
// is pulled.
var containerdConfig = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/root"
state = "{{.Dir}}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/opt"

# The v1 runtime is not used, but containerd 1.6's task service needs it
# loaded: its folder is ours too.
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = "{{.Dir}}/runc-v1"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.Image}}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{.Dir}}/runc"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.CNIConfDir}}"
    max_conf_num = 1
`))

func containerdSocket(dataDir string) string {
	return filepath.Join(dataDir, "containerd", "containerd.sock")
}

// startContainerd writes the configuration, starts containerd and waits
// until its CRI service answers.
func startContainerd(ctx context.Context, dataDir string) (*process, error) {
	dir := filepath.Join(dataDir, "containerd")
	configPath := filepath.Join(dir, "config.toml")
	var config strings.Builder
	err := containerdConfig.Execute(&config, map[string]string{
		"Dir": dir, "Socket": containerdSocket(dataDir), "Image": Image,
		"CNIBinDir": cniBinDir, "CNIConfDir": filepath.Join(dataDir, "cni", "net.d"),
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(configPath, []byte(config.String()), 0o600); err != nil {
		return nil, err
	}
	bin, err := lookPath("containerd")
	if err != nil {
		return nil, err
	}
	p, err := startProcess("containerd", filepath.Join(dataDir, "logs"), bin, "--config", configPath)
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("containerd exited: see %s", p.logPath)
		}
		return withCRI(ctx, dataDir, func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
			_, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		}) == nil, nil
	})
	if err != nil {
		_ = p.stop(10 * time.Second)
		return nil, fmt.Errorf("containerd not answering: %w", err)
	}
	return p, nil
}

// withCRI calls fn with a client of containerd's CRI runtime service.
func withCRI(ctx context.Context, dataDir string, fn func(context.Context, runtimeapi.RuntimeServiceClient) error) error {
	conn, err := grpc.NewClient("unix://"+containerdSocket(dataDir), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return fn(ctx, runtimeapi.NewRuntimeServiceClient(conn))
}

// importImage imports the OCI archive into containerd's CRI namespace,
// unpacked for its snapshotter, where the kubelet finds it.
func importImage(ctx context.Context, dataDir, archive string) error {
	ctr, err := lookPath("ctr")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, ctr, "--address", containerdSocket(dataDir), "--namespace", "k8s.io",
		"images", "import", "--snapshotter", "overlayfs", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("import %s: %v: %s", archive, err, out)
	}
	return nil
}

// removePods stops and removes every pod sandbox (and so its containers)
// through the CRI, as the kubelet would: containerd kills the processes,
// CNI releases the address and containerd removes the network namespace.
func removePods(ctx context.Context, dataDir string) error {
	return withCRI(ctx, dataDir, func(ctx context.Context, rs runtimeapi.RuntimeServiceClient) error {
		list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return fmt.Errorf("list pod sandboxes: %w", err)
		}
		for _, sb := range list.Items {
			if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				return fmt.Errorf("stop pod sandbox %s (%s/%s): %w", sb.Id, sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err)
			}
			if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				return fmt.Errorf("remove pod sandbox %s (%s/%s): %w", sb.Id, sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err)
			}
		}
		return nil
	})
}
