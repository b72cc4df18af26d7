//go:build e2e

package csisidecars

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// The real Kubernetes CSI sidecars, external-provisioner,
// external-attacher and external-resizer (and the snapshotter's, see
// snapshots_harness_test.go), as processes against the test control plane
// and the driver's socket. scripts/build-csi-sidecars.sh builds them into
// bin/.

// csiSidecarBinaries are the sidecars' paths, and the folder of the
// snapshot CRDs the script copies beside them.
type csiSidecarBinaries struct {
	provisioner, attacher, resizer, snapshotter, snapshotController, snapshotCRDs string
}

// sidecarBuild builds the sidecars once per test binary when they are
// missing (a `go test` run without `make test`).
var sidecarBuild struct {
	once sync.Once
	err  error
}

// csiSidecars returns the built sidecars, building them when missing; the
// test is skipped only when they are missing and cannot be built.
func csiSidecars(t testing.TB) csiSidecarBinaries {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins := csiSidecarBinaries{
		provisioner:        filepath.Join(root, "bin", "csi-provisioner"),
		attacher:           filepath.Join(root, "bin", "csi-attacher"),
		resizer:            filepath.Join(root, "bin", "csi-resizer"),
		snapshotter:        filepath.Join(root, "bin", "csi-snapshotter"),
		snapshotController: filepath.Join(root, "bin", "snapshot-controller"),
		snapshotCRDs:       filepath.Join(root, "bin", "snapshot-crds"),
	}
	missing := func() bool {
		for _, p := range []string{bins.provisioner, bins.attacher, bins.resizer, bins.snapshotter, bins.snapshotController, filepath.Join(bins.snapshotCRDs, "version")} {
			if _, err := os.Stat(p); err != nil {
				return true
			}
		}
		return false
	}
	if !missing() {
		return bins
	}
	sidecarBuild.once.Do(func() {
		t.Logf("the CSI sidecars are not built: running scripts/build-csi-sidecars.sh (several minutes the first time)")
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "build-csi-sidecars.sh"))
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			sidecarBuild.err = fmt.Errorf("%v: %s", err, lastLines(string(out), 20))
		}
	})
	if sidecarBuild.err != nil || missing() {
		t.Skipf("the CSI sidecars (bin/csi-provisioner, bin/csi-attacher, bin/csi-resizer, bin/csi-snapshotter, bin/snapshot-controller, bin/snapshot-crds) are missing and scripts/build-csi-sidecars.sh could not build them: %v", sidecarBuild.err)
	}
	return bins
}

// serveCSIDriver serves the CSI driver, Controller service and the Node
// service of node, against the manager of e; it stops with the test.
func serveCSIDriver(t testing.TB, e *framework.APIEnv, node string) string {
	t.Helper()
	sock, _ := framework.ServeCSI(t, e, csi.Options{NodeID: node, Controller: true, StateDir: t.TempDir()})
	return sock
}

// sidecarKubeconfig writes a kubeconfig of the cluster's admin config for
// the sidecars.
func sidecarKubeconfig(t testing.TB, cluster *testcluster.Cluster) string {
	t.Helper()
	cfg := cluster.Config
	const name = "test"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.TLSClientConfig.CAFile,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
		InsecureSkipTLSVerify:    cfg.TLSClientConfig.Insecure,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		ClientCertificate:     cfg.TLSClientConfig.CertFile,
		ClientCertificateData: cfg.TLSClientConfig.CertData,
		ClientKey:             cfg.TLSClientConfig.KeyFile,
		ClientKeyData:         cfg.TLSClientConfig.KeyData,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startSidecar runs a sidecar until the test ends, its log (klog's, to
// standard error) in a file of the test's own whose tail is shown when
// the test fails or the sidecar stops before the test does.
func startSidecar(t testing.TB, bin string, args ...string) {
	t.Helper()
	startSidecarWithEnv(t, nil, bin, args...)
}

// startSidecarWithEnv is startSidecar with env (KEY=value) added to the
// sidecar's environment, as a pod's env adds it.
func startSidecarWithEnv(t testing.TB, env []string, bin string, args ...string) {
	t.Helper()
	name := filepath.Base(bin)
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stoppedEarly := false
		select {
		case err := <-exited:
			stoppedEarly = true
			t.Errorf("%s stopped before the test ended: %v", name, err)
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		logFile.Close()
		if t.Failed() || stoppedEarly {
			data, _ := os.ReadFile(logPath)
			t.Logf("the last lines of %s's log (%s):\n%s", name, logPath, lastLines(string(data), 150))
		}
	})
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
