package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// lockPath is held (flock) while a cluster runs: one at a time, as the
// bridge, the subnet and the kubelet's port are fixed. statePath names the
// data folder of the running cluster and the machine's folders it made;
// it is removed once Stop has cleaned up, so a start that finds it cleans
// up after a run that crashed.
const (
	lockPath  = "/run/longhorn-node-cluster.lock"
	statePath = "/run/longhorn-node-cluster.state"
)

// hostPaths are the machine's folders the node writes to whatever it is
// told: the kubelet's device plugin socket, its links to container logs,
// CNI's cache of results and containerd's shim sockets. Those a run makes
// are removed when it stops (once empty, and the kubelet's socket).
var hostPaths = []string{
	"/var/lib/kubelet", "/var/lib/kubelet/device-plugins",
	"/var/log/containers",
	"/var/lib/cni", "/var/lib/cni/results",
	"/run/containerd", "/run/containerd/s",
}

// lockMachine takes the machine's cluster lock, cleans up after a previous
// run that did not stop, and records dataDir as the running cluster's. It
// returns the lock and the hostPaths that are not there yet.
func lockMachine(dataDir string) (*os.File, []string, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		running, _ := os.ReadFile(statePath)
		return nil, nil, fmt.Errorf("another cluster runs on this machine (state %q, lock %s): one at a time", strings.TrimSpace(string(running)), lockPath)
	}
	if data, err := os.ReadFile(statePath); err == nil {
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if prev := lines[0]; prev != "" {
			logrus.WithField("dataDir", prev).Warn("The previous cluster did not stop: cleaning up what it left")
			if err := cleanupNode(prev, nil); err != nil {
				unlockFile(f)
				return nil, nil, fmt.Errorf("clean up after the previous cluster (data folder %s): %w", prev, err)
			}
			removeHostPaths(lines[1:])
		}
	}
	// A run with this folder may also have left a component running.
	if err := cleanupNode(dataDir, nil); err != nil {
		unlockFile(f)
		return nil, nil, fmt.Errorf("clean up %s before starting: %w", dataDir, err)
	}
	var created []string
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			created = append(created, p)
		}
	}
	state := strings.Join(append([]string{dataDir}, created...), "\n") + "\n"
	if err := os.WriteFile(statePath, []byte(state), 0o600); err != nil {
		unlockFile(f)
		return nil, nil, err
	}
	return f, created, nil
}

// unlockMachine removes the machine's folders the run made, forgets the
// running cluster and releases the lock.
func unlockMachine(f *os.File, created []string) error {
	removeHostPaths(created)
	err := os.Remove(statePath)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	unlockFile(f)
	return err
}

// removeHostPaths removes the folders of hostPaths a run made, deepest
// first, when they hold nothing but the kubelet's own socket: what
// another program put there stays, and is logged.
func removeHostPaths(created []string) {
	paths := append([]string{}, created...)
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, p := range paths {
		if p == "/var/lib/kubelet/device-plugins" {
			_ = os.Remove(filepath.Join(p, "kubelet.sock"))
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			logrus.WithError(err).WithField("path", p).Warn("Leaving a folder the cluster made: it is not empty")
		}
	}
}

func unlockFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// cleanupNode removes what a node under dataDir left: its processes (a
// kubelet, kube-proxy, CoreDNS, containerd, a control plane of a crashed
// run), its pods, the pods' cgroups, the mounts under dataDir, the bridge,
// the kubelet's log links and the nftables tables of the cluster and its
// kube-proxy. containerd, when running, is the one this run started;
// otherwise one is started on the folder to remove the pods cleanly.
func cleanupNode(dataDir string, containerd *process) error {
	if !filepath.IsAbs(dataDir) || len(dataDir) < 5 {
		return fmt.Errorf("refusing to clean up %q: not an absolute data folder", dataDir)
	}
	log := logrus.WithField("dataDir", dataDir)
	var errs []error
	keep := map[int]bool{}
	if containerd != nil && !containerd.exited() {
		keep[containerd.cmd.Process.Pid] = true
	}
	// Stale processes first, but not the shims: they keep the containers
	// that containerd removes next.
	socket := containerdSocket(dataDir)
	killProcesses(dataDir, []string{"coredns", "kube-proxy", "kubelet", "containerd", "controlplane"}, keep, 15*time.Second)

	if _, err := os.Stat(filepath.Join(dataDir, "containerd", "config.toml")); err == nil {
		if containerd == nil || containerd.exited() {
			var err error
			if containerd, err = startContainerd(context.Background(), dataDir); err != nil {
				log.WithError(err).Warn("Cannot start containerd to remove the pods: removing what is left by hand")
				containerd = nil
			}
		}
		if containerd != nil {
			if err := removePods(context.Background(), dataDir); err != nil {
				errs = append(errs, err)
			}
			errs = append(errs, containerd.stop(30*time.Second))
		}
	}
	// The shims exit once their containers are gone; one that does not
	// is killed, its containers with it (their cgroups, below).
	killProcesses(socket, []string{"containerd-shim-runc-v2"}, nil, 10*time.Second)
	errs = append(errs, removeCgroups())
	errs = append(errs, unmountUnder(dataDir))
	// The bridge, and its forwarding with it, before the filter that
	// keeps that forwarding to the bridge.
	errs = append(errs, deleteBridge())
	errs = append(errs, deleteKernelTables())
	errs = append(errs, removeLogLinks(dataDir))
	return errors.Join(errs...)
}

// killProcesses stops the processes (but this one and those in keep) of
// one of the programs named, with an argument that contains marker:
// SIGTERM, then SIGKILL after grace. marker is a path of this cluster's,
// so only its processes are chosen.
func killProcesses(marker string, programs []string, keep map[int]bool, grace time.Duration) {
	pids := findProcesses(marker, programs, keep)
	if len(pids) == 0 {
		return
	}
	for _, pid := range pids {
		logrus.WithFields(logrus.Fields{"pid": pid, "marker": marker}).Info("Stopping a process the cluster left")
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if len(findProcesses(marker, programs, keep)) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, pid := range findProcesses(marker, programs, keep) {
		logrus.WithField("pid", pid).Warn("Killing a process of the cluster that did not stop")
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func findProcesses(marker string, programs []string, keep map[int]bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || keep[pid] {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if !slices.Contains(programs, filepath.Base(args[0])) || !containsArg(args, marker) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func containsArg(args []string, marker string) bool {
	for _, a := range args {
		if strings.Contains(a, marker) {
			return true
		}
	}
	return false
}

// removeCgroups kills what is left in the pods' cgroups and removes them,
// in every cgroup v1 hierarchy.
func removeCgroups() error {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	var dirs []string
	for _, h := range hierarchies {
		root := filepath.Join(h, CgroupRoot)
		_ = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	for _, dir := range dirs {
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, field := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(field); err == nil {
				logrus.WithFields(logrus.Fields{"pid": pid, "cgroup": dir}).Warn("Killing a process left in a pod's cgroup")
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// Deepest first; a cgroup goes once its processes have exited.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, dir := range dirs {
		var err error
		for i := 0; i < 50; i++ {
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount at or under dir (the kubelet's bind
// mount of its root folder, the pods' volumes, containerd's overlays),
// deepest first.
func unmountUnder(dir string) error {
	for round := 0; round < 10; round++ {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		var points []string
		for _, line := range strings.Split(string(data), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 5 {
				continue
			}
			p := unescapeMountPath(fields[4])
			if p == dir || strings.HasPrefix(p, dir+"/") {
				points = append(points, p)
			}
		}
		if len(points) == 0 {
			return nil
		}
		sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("unmount %s: %w", p, err)
			}
		}
	}
	return fmt.Errorf("mounts under %s remain after 10 rounds of unmounting", dir)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeLogLinks removes the links the kubelet keeps in /var/log/containers
// for its containers' logs, those that point into dataDir.
func removeLogLinks(dataDir string) error {
	entries, err := os.ReadDir("/var/log/containers")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		link := filepath.Join("/var/log/containers", e.Name())
		target, err := os.Readlink(link)
		if err == nil && strings.HasPrefix(target, dataDir+"/") {
			if err := os.Remove(link); err != nil {
				return err
			}
		}
	}
	return nil
}
