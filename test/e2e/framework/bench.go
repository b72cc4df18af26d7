package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// DaemonProcess is `longhorn-manager daemon` run as a child process, so a
// benchmark measures the manager's own memory and nothing of the test's.
type DaemonProcess struct {
	cmd     *exec.Cmd
	API     string
	done    chan error
	logPath string
	args    []string // the binary and its arguments, to start it again
	dir     string
}

// StartDaemonProcess builds the manager binary, then runs its daemon in
// namespace as cfg's user, with extra flags if any, and waits until it is
// ready.
func StartDaemonProcess(b testing.TB, cfg *rest.Config, namespace string, extra ...string) *DaemonProcess {
	b.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "longhorn-manager")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v: %s", err, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(b, kubeconfig, cfg)
	apiAddress := FreeAddress(b)
	d := &DaemonProcess{API: apiAddress, dir: dir, args: append([]string{bin, "daemon", "--kubeconfig", kubeconfig, "--namespace", namespace,
		"--node-name", "node-1", "--data-dir", filepath.Join(dir, "disk"),
		"--api-address", apiAddress, "--engine-address", FreeAddress(b),
		"--service-account", ServiceAccount, "--default-setting", "replica-soft-anti-affinity=true", "--default-setting", "storage-minimal-available-percentage=0"}, extra...)}
	b.Cleanup(func() { d.Stop(b) })
	d.Launch(b, "daemon.log")
	return d
}

// Restart stops the daemon and starts it again on the same data
// directory, API and engine addresses (an engine's address is in its
// Engine status, as a node's fixed port would be) and flags, and waits until it is ready. Its
// /metrics counters start again from zero.
func (d *DaemonProcess) Restart(b testing.TB) {
	b.Helper()
	d.Stop(b)
	d.Launch(b, "daemon-restarted.log")
}

func (d *DaemonProcess) Launch(b testing.TB, logName string) {
	b.Helper()
	d.logPath = filepath.Join(d.dir, logName)
	logFile, err := os.Create(d.logPath)
	if err != nil {
		b.Fatal(err)
	}
	d.done = make(chan error, 1)
	d.cmd = exec.Command(d.args[0], d.args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	cmd, done := d.cmd, d.done
	go func() { done <- cmd.Wait(); logFile.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + d.API + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-d.done:
			b.Fatalf("daemon exited before it was ready: %v (log %s)", err, d.logPath)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("daemon not ready within 60s (log %s)", d.logPath)
		}
	}
}

// Stop sends SIGTERM and waits, killing the daemon after 60 seconds.
func (d *DaemonProcess) Stop(b testing.TB) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		b.Logf("daemon did not stop within 60s; killing pid %d", d.cmd.Process.Pid)
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// ProcStatus reads a field of the daemon's /proc status in KiB (VmHWM is
// the peak resident set).
func (d *DaemonProcess) ProcStatus(b testing.TB, field string) float64 {
	b.Helper()
	return ProcStatus(b, d.cmd.Process.Pid, field)
}

// ProcStatus is a field of /proc/PID/status in KiB (VmRSS, VmHWM).
func ProcStatus(b testing.TB, pid int, field string) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("%s: %v", field, err)
			}
			return kib
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// OpenFiles counts the daemon's open file descriptors.
func (d *DaemonProcess) OpenFiles() int {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid))
	return len(entries)
}

// metrics scrapes the daemon's /metrics and sums each counter family's
// samples whose labels contain every given fragment.
type Scrape map[string]float64

func (d *DaemonProcess) Metrics(b testing.TB) Scrape {
	b.Helper()
	resp, err := http.Get("http://" + d.API + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := Scrape{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// Sum adds the samples of family whose labels hold every fragment.
func (s Scrape) Sum(family string, fragments ...string) float64 {
	var total float64
next:
	for series, v := range s {
		if series != family && !strings.HasPrefix(series, family+"{") {
			continue
		}
		for _, f := range fragments {
			if !strings.Contains(series, f) {
				continue next
			}
		}
		total += v
	}
	return total
}

// APIWrites is the daemon's requests to the apiserver other than GETs.
func (s Scrape) APIWrites(fragments ...string) float64 {
	all := s.Sum("longhorn_manager_kube_api_requests_total", fragments...)
	return all - s.Sum("longhorn_manager_kube_api_requests_total", append(fragments, `method="GET"`)...)
}

func writeKubeconfig(b testing.TB, path string, cfg *rest.Config) {
	b.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData,
		TLSServerName: cfg.ServerName, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, ClientCertificateData: cfg.CertData,
		ClientKeyData: cfg.KeyData, Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
}

func FreeAddress(b testing.TB) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// RaiseOpenFileLimit lets the daemon (which inherits it) keep every layer
// file of 1,000 volumes × 30 snapshots open: the engine holds each layer
// of a replica's chain open, 31 files for a 30-snapshot volume. Only root
// may raise the hard limit; others keep theirs.
func RaiseOpenFileLimit(b testing.TB, want uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= want {
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: max(want, lim.Max)}); err != nil {
		b.Logf("cannot raise the open-file limit to %d (have %d): %v", want, lim.Cur, err)
	}
}

// LogDelta logs how the daemon's API writes and engine calls grew.
func LogDelta(b testing.TB, phase string, before, after Scrape) {
	var lines []string
	for series, v := range after {
		writes := strings.HasPrefix(series, "longhorn_manager_kube_api_requests_total") && !strings.Contains(series, `method="GET"`)
		if (writes || strings.HasPrefix(series, "longhorn_manager_engine_calls_total")) && v != before[series] {
			lines = append(lines, fmt.Sprintf("%s +%.0f", series, v-before[series]))
		}
	}
	slices.Sort(lines)
	b.Logf("%s: %s", phase, strings.Join(lines, ", "))
}

// Parallel runs f on every item with n workers and fails on the first error.
func Parallel(b testing.TB, n int, items []string, f func(string) error) {
	b.Helper()
	work := make(chan string)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for item := range work {
				if err := f(item); err != nil {
					errs <- err
					for range work {
					}
					return
				}
			}
		}()
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func (d *DaemonProcess) Post(path, body string) error { return d.PostJSON(path, body, nil) }

func (d *DaemonProcess) PostJSON(path, body string, out any) error {
	resp, err := http.Post("http://"+d.API+path, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&msg)
		return fmt.Errorf("POST %s: %d %v", path, resp.StatusCode, msg["message"])
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// LoadAverage is the machine's 1-minute load average, as text.
func LoadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(raw))[0]
}
