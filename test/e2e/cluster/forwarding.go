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
// bridge: the node routes it, which needs IPv4 forwarding. The cluster
// turns it on when it is off, and keeps what is forwarded to the bridge's
// own traffic with a table of its own (filterTable): nothing is forwarded
// from the pods beyond the bridge, or from elsewhere to them.

// ipForwardSysctl is the machine's IPv4 forwarding switch.
const ipForwardSysctl = "/proc/sys/net/ipv4/ip_forward"

// filterTable is the cluster's own nftables table (family inet).
const filterTable = "longhorn-node"

// stateSysctlPrefix starts the lines of the machine's state file that
// record a sysctl's value before the cluster changed it: "sysctl PATH
// VALUE".
const stateSysctlPrefix = "sysctl "

// kernelTables are the nftables tables a cluster leaves in the kernel:
// its own and those kube-proxy's nftables mode makes (it does not remove
// them when it stops). Stop and the crash clean-up delete them.
var kernelTables = []string{"inet " + filterTable, "ip kube-proxy", "ip6 kube-proxy"}

// forwardingFilter is filterTable's ruleset: bridge to bridge is forwarded
// (a pod to another through a Service, the reply, and, with the kernel's
// bridge netfilter, traffic between pods), anything else to or from the
// bridge is not. exclusive also drops all other forwarding: the machine
// forwarded nothing before the cluster turned it on.
func forwardingFilter(exclusive bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n", filterTable)
	fmt.Fprintf(&b, "\t\tiifname %q oifname %q accept\n", BridgeName, BridgeName)
	fmt.Fprintf(&b, "\t\tiifname %q drop\n\t\toifname %q drop\n", BridgeName, BridgeName)
	if exclusive {
		b.WriteString("\t\tdrop\n")
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// enableForwarding installs the forwarding filter, then turns IPv4
// forwarding on if it is off, recording its value first in the machine's
// state file so that Stop, or the clean-up after a crash, restores it.
// It returns the value to restore ("" when forwarding was already on).
func enableForwarding() (restore string, err error) {
	old, err := readSysctl(ipForwardSysctl)
	if err != nil {
		return "", err
	}
	if _, err := nftOutput(forwardingFilter(old == "0"), "-f", "-"); err != nil {
		return "", fmt.Errorf("install the forwarding filter: %w", err)
	}
	if old != "0" {
		return "", nil
	}
	if err := appendState(stateSysctlPrefix + ipForwardSysctl + " " + old); err != nil {
		return "", err
	}
	logrus.WithField("sysctl", ipForwardSysctl).Info("Turning IPv4 forwarding on for the node's Services (restored at stop)")
	if err := os.WriteFile(ipForwardSysctl, []byte("1"), 0o644); err != nil {
		return old, fmt.Errorf("turn IPv4 forwarding on: %w", err)
	}
	return old, nil
}

// restoreSysctl writes a value the cluster recorded back.
func restoreSysctl(path, value string) error {
	if !strings.HasPrefix(path, "/proc/sys/") {
		return fmt.Errorf("refusing to restore %q: not a sysctl", path)
	}
	logrus.WithFields(logrus.Fields{"sysctl": path, "value": value}).Info("Restoring a sysctl the cluster changed")
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("restore %s to %s: %w", path, value, err)
	}
	return nil
}

// restoreRecordedSysctls restores the sysctls of a state file's lines.
func restoreRecordedSysctls(lines []string) error {
	var errs []error
	for _, line := range lines {
		fields := strings.Fields(strings.TrimPrefix(line, stateSysctlPrefix))
		if !strings.HasPrefix(line, stateSysctlPrefix) || len(fields) != 2 {
			continue
		}
		errs = append(errs, restoreSysctl(fields[0], fields[1]))
	}
	return errors.Join(errs...)
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

// appendState adds a line to the machine's state file of the running
// cluster.
func appendState(line string) error {
	f, err := os.OpenFile(statePath, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("record %q in %s: %w", line, statePath, err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("record %q in %s: %w", line, statePath, err)
	}
	return nil
}
