package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	"github.com/cadence-storage/longhorn-manager/backingimage/manager"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

var addressLine = regexp.MustCompile(`address="?(127\.0\.0\.1:[0-9]+)`)

// startServer runs a subcommand as a child process, as the daemon will on
// the local control plane, and returns the address it logs.
func startServer(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1", "KUBECONFIG=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := addressLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-found:
		return cmd, addr
	case <-time.After(20 * time.Second):
		t.Fatalf("%v logged no address", args)
		return nil, ""
	}
}

// stopServer sends SIGTERM and expects a clean exit.
func stopServer(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%v exited with %v after SIGTERM", cmd.Args[1:2], err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%v did not stop within 10 s of SIGTERM", cmd.Args[1:2])
	}
}

func TestBackingImageServersAsChildProcesses(t *testing.T) {
	data := make([]byte, 2<<20)
	rand.Read(data)
	sum := sha512.Sum512(data)
	checksum := hex.EncodeToString(sum[:])
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image", time.Time{}, bytes.NewReader(data))
	}))
	defer src.Close()
	disk := t.TempDir()
	os.WriteFile(filepath.Join(disk, backingimage.DiskConfigFile), []byte(`{"diskName":"d","diskUUID":"disk-1"}`), 0o644)

	dsCmd, dsAddr := startServer(t, "backing-image-data-source", "--listen", "127.0.0.1:0", "--name", "cirros", "--uuid", "u1",
		"--source-type", "download", "--parameter", "url="+src.URL+"/image", "--checksum", checksum,
		"--disk-path", disk, "--disk-uuid", "disk-1", "--download-allowed-ranges", "127.0.0.1/32", "--tls-dir", mtlstest.Dir(t))
	bimCmd, bimAddr := startServer(t, "backing-image-manager", "--listen", "127.0.0.1:0", "--disk-path", disk, "--disk-uuid", "disk-1", "--tls-dir", mtlstest.Dir(t))

	ctx := context.Background()
	ds := datasource.NewClient(dsAddr, mtlstest.Identity(t))
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := ds.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == longhorn.BackingImageStateReadyForTransfer {
			break
		}
		if st.State == longhorn.BackingImageStateFailed || time.Now().After(deadline) {
			t.Fatalf("data source: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bim, err := manager.NewClient(bimAddr, 10*time.Second, mtlstest.Identity(t))
	if err != nil {
		t.Fatal(err)
	}
	defer bim.Close()
	if _, err := bim.Fetch(ctx, "cirros", "u1", checksum, dsAddr, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := bim.Get(ctx, "cirros", "u1")
		if err != nil {
			t.Fatal(err)
		}
		if info.State == longhorn.BackingImageStateReady {
			break
		}
		if info.State == longhorn.BackingImageStateFailed || time.Now().After(deadline) {
			t.Fatalf("manager: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := os.ReadFile(filepath.Join(backingimage.FileFolder(disk, "cirros", "u1"), backingimage.DataFile))
	if !bytes.Equal(got, data) {
		t.Fatal("the manager's file differs from the download")
	}
	stopServer(t, dsCmd)
	stopServer(t, bimCmd)
}

func TestBackingImageServersRefuseBadFlags(t *testing.T) {
	disk := t.TempDir()
	os.WriteFile(filepath.Join(disk, backingimage.DiskConfigFile), []byte(`{"diskUUID":"disk-1"}`), 0o644)
	tlsDir := mtlstest.Dir(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"data source without a name", []string{"backing-image-data-source", "--disk-path", disk}, "--name is required"},
		{"parameter without a value", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "download",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--parameter", "url"}, `--parameter "url": must be key=value`},
		{"download of a file URL", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "download",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--parameter", "url=file:///etc/passwd"}, `parameter url "file:///etc/passwd"`},
		{"data source on another disk", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "upload",
			"--disk-path", disk, "--disk-uuid", "disk-2"}, "has UUID disk-1, want disk-2"},
		{"export without an engine", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "export-from-volume",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--parameter", "volume-name=v", "--parameter", "snapshot-name=s"}, "--engine-address is required for export-from-volume"},
		{"export from an engine without a port", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "export-from-volume",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--engine-address", "127.0.0.1"}, `--engine-address "127.0.0.1": must be host:port`},
		{"export to vmdk", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "export-from-volume",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--engine-address", "127.0.0.1:1", "--parameter", "volume-name=v",
			"--parameter", "snapshot-name=s", "--parameter", "export-type=vmdk"}, `parameter export-type "vmdk": must be raw or qcow2`},
		{"download allowing a malformed range", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "download",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--parameter", "url=http://example.com/i", "--download-allowed-ranges", "10.0.0.0/33"}, `--download-allowed-ranges: "10.0.0.0/33" is not a CIDR range`},
		{"download with a negative bound", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "download",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--parameter", "url=http://example.com/i", "--download-max-size", "-1"}, "--download-max-size must be 0 or more bytes"},
		{"manager without a disk", []string{"backing-image-manager"}, "--disk-path is required"},
		{"manager on another disk", []string{"backing-image-manager", "--disk-path", disk, "--disk-uuid", "disk-2"}, "has UUID disk-1, want disk-2"},
		{"manager that sends nothing", []string{"backing-image-manager", "--disk-path", disk, "--disk-uuid", "disk-1", "--max-sends", "0"}, "--max-sends must be at least 1"},
		// No server answers without the internal TLS identity.
		{"data source without a TLS folder", []string{"backing-image-data-source", "--name", "a", "--uuid", "u", "--source-type", "upload",
			"--disk-path", disk, "--disk-uuid", "disk-1", "--tls-dir", ""}, "--tls-dir is required"},
		{"manager without a TLS folder", []string{"backing-image-manager", "--disk-path", disk, "--disk-uuid", "disk-1", "--tls-dir", ""}, "--tls-dir is required"},
		{"manager with an empty TLS folder", []string{"backing-image-manager", "--disk-path", disk, "--disk-uuid", "disk-1", "--tls-dir", t.TempDir()}, "--tls-dir: open"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A good --tls-dir first: a case's own comes later and wins.
			out, code := runManager(t, append([]string{c.args[0], "--tls-dir", tlsDir}, c.args[1:]...)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code == 0 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Fatalf("exit %d, output:\n%s\nwant one line saying %q", code, out, c.want)
			}
		})
	}
}
