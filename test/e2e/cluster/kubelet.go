package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// kubeletConfig is the kubelet's configuration for this machine's cgroup
// v1 hierarchy without systemd: cgroupfs, no QoS cgroups and no node
// allocatable enforcement, the pods' cgroups under CgroupRoot. It listens
// on the bridge's address only, where the apiserver reaches it; it takes
// anonymous requests and allows all of them, as the apiserver has no
// client certificate for it: only this machine and its pods can reach the
// address. Its logs, plugins and pods are under the data folder. Eviction
// and image garbage collection are off: the machine's disk is shared, and
// the only image must stay.
var kubeletConfig = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{.NodeIP}}
port: 10250
readOnlyPort: 0
healthzPort: 0
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
cgroupRoot: {{.CgroupRoot}}
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://{{.Socket}}
podLogsDir: {{.Dir}}/logs/pods
volumePluginDir: {{.Dir}}/kubelet/volume-plugins
staticPodPath: ""
podCIDR: {{.PodSubnet}}
resolvConf: /etc/resolv.conf
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  imagefs.available: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`))

// startKubelet writes the kubelet's configuration and starts it, with the
// control plane's admin kubeconfig, registering NodeName at NodeIP.
func startKubelet(dataDir, binDir, kubeconfig string) (*process, error) {
	var config strings.Builder
	err := kubeletConfig.Execute(&config, map[string]string{
		"NodeIP": NodeIP, "CgroupRoot": CgroupRoot, "Socket": containerdSocket(dataDir),
		"Dir": dataDir, "PodSubnet": PodSubnet,
	})
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(dataDir, "kubelet", "config.yaml")
	if err := os.WriteFile(configPath, []byte(config.String()), 0o600); err != nil {
		return nil, err
	}
	return startProcess("kubelet", filepath.Join(dataDir, "logs"), filepath.Join(binDir, "kubelet"),
		"--config", configPath,
		"--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(dataDir, "kubelet", "root"),
		"--cert-dir", filepath.Join(dataDir, "kubelet", "pki"),
		"--hostname-override", NodeName,
		"--node-ip", NodeIP,
	)
}
