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
// on the bridge's address only, where the apiserver reaches it, and takes
// no anonymous request: the apiserver comes with its client certificate
// (from the control plane's CA for it), anyone else with a token, and the
// kubelet asks the apiserver whether they may (SubjectAccessReview), so a
// pod on the bridge cannot exec into another. Pods resolve names with the
// cluster's DNS, CoreDNS on the node's address (services.go); the machine's
// resolv.conf is for pods of dnsPolicy Default and the hosts' network. It
// makes no iptables chains (makeIPTablesUtilChains: they are for
// kube-proxy's iptables mode, and it would leave them in the machine's
// tables). Its
// logs, plugins and pods are under the data folder. Eviction
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
makeIPTablesUtilChains: false
clusterDNS: [{{.NodeIP}}]
clusterDomain: {{.ClusterDomain}}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {{.ClientCA}}
authorization:
  mode: Webhook
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
// controlPlaneDir is the control plane's data folder, which holds the CA
// of the apiserver's client certificate for kubelets.
func startKubelet(dataDir, binDir, controlPlaneDir, kubeconfig string) (*process, error) {
	var config strings.Builder
	err := kubeletConfig.Execute(&config, map[string]string{
		"NodeIP": NodeIP, "CgroupRoot": CgroupRoot, "Socket": containerdSocket(dataDir),
		"Dir": dataDir, "PodSubnet": PodSubnet, "ClusterDomain": ClusterDomain,
		"ClientCA": filepath.Join(controlPlaneDir, "kubelet-client", "ca.crt"),
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
