package framework

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fill writes b at off in want, as qemu-io's "write -P b off len" does.
func Fill(want []byte, b byte, off, n int) {
	for i := off; i < off+n; i++ {
		want[i] = b
	}
}

// WaitSnapshotReady waits until the Snapshot object of a snapshot taken
// through the API is ready to use, as a clone of it asks.
func (e *APIEnv) WaitSnapshotReady(t *testing.T, name string) {
	t.Helper()
	Eventually(t, 30*time.Second, "snapshot "+name+" ready to use", func() (bool, error) {
		s, err := e.LH.LonghornV1beta2().Snapshots(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && s.Status.ReadyToUse, nil
	})
}

// WaitCloned waits until the volume's clone completed, and shows its
// status if it does not.
func (e *APIEnv) WaitCloned(t *testing.T, name string) map[string]any {
	t.Helper()
	var last map[string]any
	done := false
	defer func() {
		if !done {
			t.Logf("volume %s: state %v, cloneStatus %v, conditions %v", name, last["state"], last["cloneStatus"], last["conditions"])
		}
	}()
	Eventually(t, 60*time.Second, "volume "+name+" cloned", func() (bool, error) {
		r := e.Call(t, "GET", "/v1/volumes/"+name, "")
		last = r.Body
		cs, _ := r.Body["cloneStatus"].(map[string]any)
		return r.Status == 200 && cs["state"] == "completed" && r.Body["state"] == "detached", nil
	})
	done = true
	return last
}

// AttachedContent attaches the volume on node-1 and reads it whole
// through its NBD endpoint.
func (e *APIEnv) AttachedContent(t *testing.T, name string) []byte {
	t.Helper()
	return DeviceContent(t, e.AttachedContentEndpoint(t, name))
}

func QemuIO(t testing.TB, endpoint string, cmds ...string) string {
	t.Helper()
	path, err := exec.LookPath("qemu-io")
	if err != nil {
		t.Fatal("qemu-io is not installed: run `make test` (scripts/test.sh installs qemu-utils)")
	}
	args := []string{"-f", "raw", endpoint}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil || strings.Contains(string(out), "failed") {
		t.Fatalf("qemu-io %v: %v\n%s", cmds, err, out)
	}
	return string(out)
}

// DeviceContent copies a whole volume out through its NBD endpoint with
// nbdcopy and returns the bytes.
func DeviceContent(t *testing.T, endpoint string) []byte {
	t.Helper()
	path, err := exec.LookPath("nbdcopy")
	if err != nil {
		t.Fatal("nbdcopy is not installed: run `make test` (scripts/test.sh installs libnbd-bin)")
	}
	out := t.TempDir() + "/device.img"
	if msg, err := exec.Command(path, endpoint, out).CombinedOutput(); err != nil {
		t.Fatalf("nbdcopy %s: %v\n%s", endpoint, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (e *APIEnv) WaitVolume(t *testing.T, name, what string, cond func(v map[string]any) bool) map[string]any {
	t.Helper()
	var body map[string]any
	Eventually(t, 20*time.Second, what, func() (bool, error) {
		r := e.Call(t, "GET", "/v1/volumes/"+name, "")
		body = r.Body
		return r.Status == 200 && cond(body), nil
	})
	return body
}

// ActualSize is the size the volume's engine has, as the API's
// controllers[0].actualSize shows it ("" without an engine).
func ActualSize(v map[string]any) string {
	list, _ := v["controllers"].([]any)
	if len(list) == 0 {
		return ""
	}
	s, _ := list[0].(map[string]any)["actualSize"].(string)
	return s
}
