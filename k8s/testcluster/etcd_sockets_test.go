package testcluster

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// assertEtcdIsItsUsersAlone checks that the control plane's etcd, which
// holds every Secret and the cluster's CA keys in plain HTTP, is reached
// only through sockets in a data folder no other user may enter: the
// folder is 0700, the sockets 0600, and no TCP port of the process
// answers as etcd.
func assertEtcdIsItsUsersAlone(t *testing.T, c *Cluster) {
	t.Helper()
	if info, err := os.Stat(c.DataDir); err != nil {
		t.Fatal(err)
	} else if info.Mode().Perm() != 0o700 {
		t.Errorf("data folder %s has mode %v, want 0700", c.DataDir, info.Mode().Perm())
	}
	for _, name := range []string{"etcd-client.sock", "etcd-peer.sock"} {
		info, err := os.Stat(filepath.Join(c.DataDir, name))
		if err != nil {
			t.Errorf("etcd's socket: %v", err)
			continue
		}
		if info.Mode()&os.ModeSocket == 0 || info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want a socket of mode 0600", name, info.Mode())
		}
	}
	ports := listeningTCPPorts(t, c.cmd.Process.Pid)
	if len(ports) == 0 {
		t.Fatal("the control plane listens on no TCP port: the apiserver's should be one")
	}
	t.Logf("the control plane listens on TCP ports %v", ports)
	client := &http.Client{Timeout: 5 * time.Second}
	for _, port := range ports {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/version", port))
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if strings.Contains(string(body), "etcdserver") {
			t.Errorf("port %d answers as etcd in plain HTTP: %s", port, body)
		}
	}
}

// listeningTCPPorts returns the TCP ports pid listens on: its sockets'
// inodes (from /proc/pid/fd) matched against the listening entries of
// /proc/pid/net/tcp and tcp6.
func listeningTCPPorts(t *testing.T, pid int) []int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			local := fields[1]
			port, err := strconv.ParseInt(local[strings.LastIndexByte(local, ':')+1:], 16, 32)
			if err == nil {
				ports = append(ports, int(port))
			}
		}
		f.Close()
	}
	return ports
}
