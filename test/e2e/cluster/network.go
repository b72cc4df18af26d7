package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// createBridge makes the pods' bridge with the node's address on it, so
// the kubelet can listen there before the first pod (whose CNI call would
// otherwise make it).
func createBridge() error {
	if err := ip("link", "add", "name", BridgeName, "type", "bridge"); err != nil {
		return err
	}
	if err := ip("addr", "add", NodeIP+"/24", "dev", BridgeName); err != nil {
		return err
	}
	return ip("link", "set", BridgeName, "up")
}

// deleteBridge removes the bridge if it is there.
func deleteBridge() error {
	if err := exec.Command("ip", "link", "show", BridgeName).Run(); err != nil {
		return nil
	}
	return ip("link", "del", BridgeName)
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// writeCNIConfig writes the pods' network: a veth on the bridge and an
// address from PodSubnet for each pod, its leases under the data folder.
// There is no masquerading: pods talk to the node and each other, not
// past the machine. The plugin is not the bridge's gateway (isGateway):
// createBridge gives the bridge its address, the pods' gateway from
// host-local, and as gateway the plugin would turn the machine's
// net.ipv4.ip_forward on, for every interface, and never back off; the
// cluster forwards for the bridge alone (forwarding.go).
func writeCNIConfig(dataDir string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "longhorn-node",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      BridgeName,
			"isGateway":   false,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": PodSubnet, "gateway": NodeIP}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": filepath.Join(dataDir, "cni", "leases"),
			},
		}},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Join(dataDir, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-longhorn-node.conflist"), data, 0o644)
}

// lookPath finds a tool on PATH or in the sbin folders, which a root
// shell has but a test's environment may not.
func lookPath(tool string) (string, error) {
	if p, err := exec.LookPath(tool); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		p := filepath.Join(dir, tool)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", tool)
}
