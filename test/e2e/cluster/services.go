package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// KubernetesServiceIP is the kubernetes Service's cluster IP, the
	// first of the control plane's service range (10.0.0.0/16).
	KubernetesServiceIP = "10.0.0.1"
	// kubeProxyHealthz is where kube-proxy answers whether its rules are
	// in sync (loopback only); kubeProxyMetrics is its metrics server,
	// which it always runs.
	kubeProxyHealthz = "127.0.0.1:10256"
	kubeProxyMetrics = "127.0.0.1:10249"
)

// kubeProxyConfig runs kube-proxy in nftables mode (its own tables, "ip
// kube-proxy" and "ip6 kube-proxy") for the node, with NodePorts on the
// bridge's address only. It leaves the machine's conntrack sysctls as
// they are (0 keeps each). A Service's pods see their callers' own
// addresses, as on a real cluster (the manager's API budgets new tokens
// per client address: behind one masqueraded address, every pod of the
// node would share one budget), when the kernel's bridge netfilter
// (br_netfilter, bridge-nf-call-iptables) shows traffic inside the bridge
// to conntrack, which then undoes the DNAT of a pod's reply to another;
// kube-proxy masquerades a pod that reaches itself through its Service
// (over the bridge port's hairpin) on its own. Without bridge netfilter,
// all Service traffic is masqueraded to the node's address instead, so
// that replies come back through the node.
var kubeProxyConfig = template.Must(template.New("kube-proxy").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: {{.Kubeconfig}}
hostnameOverride: {{.NodeName}}
bindAddress: {{.NodeIP}}
healthzBindAddress: {{.Healthz}}
metricsBindAddress: {{.Metrics}}
clusterCIDR: {{.PodSubnet}}
nodePortAddresses: ["{{.NodeIP}}/32"]
nftables:
  masqueradeAll: {{.MasqueradeAll}}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`))

// corefile serves ClusterDomain from the apiserver (the kubernetes plugin,
// with the admin kubeconfig) on the bridge's address only, and answers
// NXDOMAIN for every other name: pods need no name of the internet, and
// nothing is forwarded to the machine's resolvers.
var corefile = template.Must(template.New("Corefile").Parse(`{{.Domain}}:53 {
	bind {{.NodeIP}}
	errors
	kubernetes {{.Domain}} {
		kubeconfig {{.Kubeconfig}}
	}
	cache 5
}
.:53 {
	bind {{.NodeIP}}
	template ANY ANY {
		rcode NXDOMAIN
	}
}
`))

// startKubeProxy writes kube-proxy's configuration under dataDir and
// starts it, with the admin kubeconfig, for NodeName.
func startKubeProxy(dataDir, binDir, kubeconfig string) (*process, error) {
	path, err := writeTemplate(filepath.Join(dataDir, "kube-proxy", "config.yaml"), kubeProxyConfig, map[string]string{
		"Kubeconfig": kubeconfig, "NodeName": NodeName, "NodeIP": NodeIP, "PodSubnet": PodSubnet,
		"Healthz": kubeProxyHealthz, "Metrics": kubeProxyMetrics,
		"MasqueradeAll": strconv.FormatBool(!bridgeNetfilter()),
	})
	if err != nil {
		return nil, err
	}
	return startProcess("kube-proxy", filepath.Join(dataDir, "logs"), filepath.Join(binDir, "kube-proxy"), "--config", path)
}

// startCoreDNS writes the Corefile under dataDir and starts CoreDNS on
// NodeIP:53 (UDP and TCP).
func startCoreDNS(dataDir, binDir, kubeconfig string) (*process, error) {
	path, err := writeTemplate(filepath.Join(dataDir, "coredns", "Corefile"), corefile, map[string]string{
		"Domain": ClusterDomain, "NodeIP": NodeIP, "Kubeconfig": kubeconfig,
	})
	if err != nil {
		return nil, err
	}
	return startProcess("coredns", filepath.Join(dataDir, "logs"), filepath.Join(binDir, "coredns"), "-conf", path)
}

// bridgeNetfilter reports whether the kernel passes bridged IPv4 traffic
// through netfilter (br_netfilter loaded, bridge-nf-call-iptables on).
func bridgeNetfilter() bool {
	v, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	return err == nil && strings.TrimSpace(string(v)) == "1"
}

func writeTemplate(path string, t *template.Template, data map[string]string) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// waitServices waits until kube-proxy says its rules are in sync and
// CoreDNS answers for the kubernetes Service with its cluster IP: then a
// pod can call the apiserver by the Service's name.
func (c *Cluster) waitServices(ctx context.Context) error {
	name := "kubernetes.default.svc." + ClusterDomain
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(NodeIP, "53"))
	}}
	httpClient := &http.Client{Timeout: 2 * time.Second}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range []*process{c.kubeProxy, c.coreDNS} {
			if p.exited() {
				return false, fmt.Errorf("%s exited: see %s", p.name, p.logPath)
			}
		}
		resp, err := httpClient.Get("http://" + kubeProxyHealthz + "/healthz")
		if err != nil {
			last = "kube-proxy: " + err.Error()
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = "kube-proxy: healthz " + resp.Status
			return false, nil
		}
		lookupCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := resolver.LookupHost(lookupCtx, name)
		if err != nil {
			last = "coredns: " + err.Error()
			return false, nil
		}
		if len(addrs) != 1 || addrs[0] != KubernetesServiceIP {
			last = fmt.Sprintf("coredns: %s is %v, want %s", name, addrs, KubernetesServiceIP)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the node's Services are not served within a minute (%s; logs in %s): %w", last, filepath.Join(c.DataDir, "logs"), err)
	}
	return nil
}
