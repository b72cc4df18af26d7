package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
)

// A pod that calls a Service's cluster IP sends to the node (its gateway);
// kube-proxy's DNAT sends the packet on to the chosen pod, back out of the
// bridge: the node routes it. The cluster turns IPv4 forwarding on for
// what arrives on the bridge alone (net.ipv4.conf.lhnode0.forwarding; the
// machine's net.ipv4.ip_forward stays as it is, and with it every other
// interface's), and a table of its own (filterTable) keeps it to the
// bridge: nothing is forwarded from the pods beyond the bridge, or from
// elsewhere to them. The setting goes with the bridge.

// filterTable is the cluster's own nftables table (family inet).
const filterTable = "longhorn-node"

// kernelTables are the nftables tables a cluster leaves in the kernel:
// its own and those kube-proxy's nftables mode makes (it does not remove
// them when it stops). Stop and the crash clean-up delete them.
var kernelTables = []string{"inet " + filterTable, "ip kube-proxy", "ip6 kube-proxy"}

// forwardingFilter is filterTable's ruleset: bridge to bridge is forwarded
// (a pod to another through a Service, the reply, and, with the kernel's
// bridge netfilter, traffic between pods), anything else to or from the
// bridge is not.
func forwardingFilter() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n", filterTable)
	fmt.Fprintf(&b, "\t\tiifname %q oifname %q accept\n", BridgeName, BridgeName)
	fmt.Fprintf(&b, "\t\tiifname %q drop\n\t\toifname %q drop\n", BridgeName, BridgeName)
	b.WriteString("\t}\n}\n")
	return b.String()
}

// enableForwarding installs the forwarding filter, then turns forwarding
// on for the bridge.
func enableForwarding() error {
	if _, err := nftOutput(forwardingFilter(), "-f", "-"); err != nil {
		return fmt.Errorf("install the forwarding filter: %w", err)
	}
	sysctl := "/proc/sys/net/ipv4/conf/" + BridgeName + "/forwarding"
	if err := os.WriteFile(sysctl, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turn IPv4 forwarding on for %s: %w", BridgeName, err)
	}
	return nil
}

// deleteKernelTables removes kernelTables, those that are there.
func deleteKernelTables() error {
	present, err := presentKernelTables()
	if err != nil {
		return err
	}
	var errs []error
	for _, table := range present {
		logrus.WithField("table", table).Info("Deleting the cluster's nftables table")
		_, err := nftOutput("", append([]string{"delete", "table"}, strings.Fields(table)...)...)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// presentKernelTables are the kernelTables in the kernel ("FAMILY NAME").
func presentKernelTables() ([]string, error) {
	if _, err := lookPath("nft"); err != nil {
		// Without nft nothing made them.
		return nil, nil
	}
	out, err := nftOutput("", "list", "tables")
	if err != nil {
		return nil, err
	}
	var present []string
	for _, line := range strings.Split(out, "\n") {
		table := strings.TrimSpace(strings.TrimPrefix(line, "table "))
		if slices.Contains(kernelTables, table) {
			present = append(present, table)
		}
	}
	return present, nil
}

// nftOutput runs nft with args, stdin on its input, and returns its
// output.
func nftOutput(stdin string, args ...string) (string, error) {
	path, err := lookPath("nft")
	if err != nil {
		return "", fmt.Errorf("%w (the nftables package)", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nft %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func readSysctl(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}
