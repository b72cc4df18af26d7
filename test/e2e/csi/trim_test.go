//go:build e2e

package csi

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// replicaFilesAllocated is the bytes on disk of the files matching glob in
// a volume's replicas, and how many replicas there are.
func replicaFilesAllocated(t *testing.T, e *csiNodeEnv, volume, glob string) (int64, int) {
	t.Helper()
	list, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	n := 0
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.VolumeName != volume {
			continue
		}
		n++
		heads, _ := filepath.Glob(filepath.Join(replicaDir(r), glob))
		for _, h := range heads {
			var st syscall.Stat_t
			if err := syscall.Stat(h, &st); err != nil {
				t.Fatal(err)
			}
			total += st.Blocks * 512
		}
	}
	return total, n
}

func replicaDir(r *longhorn.Replica) string {
	return filepath.Join(r.Spec.DiskPath, replica.ReplicasFolder, r.Spec.DataDirectoryName)
}

// A filesystem's discards reach the replicas: 64 MiB written through the
// mounted filesystem and deleted, then the trimFilesystem action (the
// manager finds the volume's mount from the CSI driver's stage and runs
// fstrim on it), and the replicas' heads give the space back. The
// discards go from the loop device to nbdfuse's file (a punched hole), to
// the NBD export (TRIM), to each replica (a hole punched in its head).
// Then a snapshot taken with the file and deleted since (marked removed)
// gives its space back to a trim too, and the same again through a
// filesystem-trim RecurringJob's run. The file kept reads back.
func TestTrimFilesystemGivesTheReplicasSpaceBack(t *testing.T) {
	if _, err := exec.LookPath("fstrim"); err != nil {
		t.Skip("fstrim (util-linux) is not installed")
	}
	e := newCSINodeEnv(t)
	staging := e.path("staging")
	e.attachedVolume(t, "trimmed", "256Mi")
	e.stage(t, "trimmed", staging, mountCap(""))
	t.Cleanup(func() { e.unstage(t, "trimmed", staging) })

	keep := bytes.Repeat([]byte("kept through the trim\n"), 4096)
	if err := os.WriteFile(filepath.Join(staging, "keep.txt"), keep, 0o644); err != nil {
		t.Fatal(err)
	}
	trimAfterDeleting := func(what string, trim func()) {
		t.Helper()
		big := make([]byte, 64<<20)
		for i := range big {
			big[i] = byte(i*7 + i/4096)
		}
		if err := os.WriteFile(filepath.Join(staging, "big.bin"), big, 0o644); err != nil {
			t.Fatal(err)
		}
		syncFS(t, staging)
		written, replicas := replicaFilesAllocated(t, e, "trimmed", "*.img")
		if replicas != 1 || written < 64<<20 {
			t.Fatalf("%d replicas hold %d bytes after 64 MiB was written, want one holding at least 64 MiB", replicas, written)
		}
		if err := os.Remove(filepath.Join(staging, "big.bin")); err != nil {
			t.Fatal(err)
		}
		syncFS(t, staging)
		trim()
		trimmed, _ := replicaFilesAllocated(t, e, "trimmed", "*.img")
		t.Logf("%s: the replica's files hold %d bytes after the write, %d after the trim", what, written, trimmed)
		if written-trimmed < 60<<20 {
			t.Errorf("%s: the replica's files hold %d bytes after the trim, %d before: want the 64 MiB deleted given back", what, trimmed, written)
		}
		if got, err := os.ReadFile(filepath.Join(staging, "keep.txt")); err != nil || !bytes.Equal(got, keep) {
			t.Errorf("%s: the file kept reads %d bytes, %v; want what was written", what, len(got), err)
		}
	}

	trimAfterDeleting("the trimFilesystem action", func() {
		e.Call(t, "POST", "/v1/volumes/trimmed?action=trimFilesystem", "").Expect(t, 200)
	})

	// A snapshot taken while the file was there, then deleted: marked
	// removed, its blocks are the head's to give back (a purge would
	// otherwise merge them into the head).
	big := bytes.Repeat([]byte("in a snapshot removed since\n"), 64<<20/28)
	if err := os.WriteFile(filepath.Join(staging, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	syncFS(t, staging)
	e.Call(t, "POST", "/v1/volumes/trimmed?action=snapshotCreate", `{"name":"with-big"}`).Expect(t, 200)
	if err := os.Remove(filepath.Join(staging, "big.bin")); err != nil {
		t.Fatal(err)
	}
	syncFS(t, staging)
	e.Call(t, "POST", "/v1/volumes/trimmed?action=snapshotDelete", `{"name":"with-big"}`).Expect(t, 200)
	before, _ := replicaFilesAllocated(t, e, "trimmed", "*.img")
	e.Call(t, "POST", "/v1/volumes/trimmed?action=trimFilesystem", "").Expect(t, 200)
	after, _ := replicaFilesAllocated(t, e, "trimmed", "*.img")
	t.Logf("a removed snapshot: the replica's files hold %d bytes before the trim, %d after", before, after)
	if before-after < 60<<20 {
		t.Errorf("the replica's files hold %d bytes after the trim, %d before: want the removed snapshot's 64 MiB given back", after, before)
	}

	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"trim","task":"filesystem-trim","cron":"@daily","retain":0,"concurrency":1,"groups":["default"]}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.Call(t, "GET", "/v1/recurringjobs/trim", "").Status == 200, nil })
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	trimAfterDeleting("a filesystem-trim job", func() {
		if out := e.RunJob(t, kubeconfig, "trim", "2026-11-26T01:00:00Z"); !strings.Contains(out, "succeeded=1 failed=0 skipped=0") {
			t.Fatalf("the filesystem-trim run: %s", out)
		}
	})
}

// trimFilesystem refuses, saying why, what has no filesystem mounted on
// its node: a detached volume, an attached one no pod mounts, one staged
// as a raw block device; a filesystem-trim run skips them.
func TestTrimFilesystemRefusesWithoutAMountedFilesystem(t *testing.T) {
	e := newCSINodeEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"detached","size":"16Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "detached", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	r := e.Call(t, "POST", "/v1/volumes/detached?action=trimFilesystem", "")
	if r.Status != 400 || !strings.Contains(r.Raw, "is detached: trimFilesystem trims the filesystem mounted from an attached volume") {
		t.Errorf("trim of a detached volume: %d %s", r.Status, r.Raw)
	}

	e.attachedVolume(t, "unmounted", "16Mi")
	r = e.Call(t, "POST", "/v1/volumes/unmounted?action=trimFilesystem", "")
	if r.Status != 400 || r.Body["code"] != "NoMountedFilesystem" || !strings.Contains(r.Raw, "is not staged by the CSI driver on this node") {
		t.Errorf("trim of a volume no pod mounts: %d %s", r.Status, r.Raw)
	}

	e.attachedVolume(t, "raw", "16Mi")
	e.stage(t, "raw", e.path("raw"), blockCap())
	t.Cleanup(func() { e.unstage(t, "raw", e.path("raw")) })
	r = e.Call(t, "POST", "/v1/volumes/raw?action=trimFilesystem", "")
	if r.Status != 400 || r.Body["code"] != "NoMountedFilesystem" || !strings.Contains(r.Raw, "is staged as a raw block device") {
		t.Errorf("trim of a raw block volume: %d %s", r.Status, r.Raw)
	}

	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"trim","task":"filesystem-trim","cron":"@daily","retain":0,"concurrency":2,"groups":["default"]}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.Call(t, "GET", "/v1/recurringjobs/trim", "").Status == 200, nil })
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	if out := e.RunJob(t, kubeconfig, "trim", "2026-11-26T01:00:00Z"); !strings.Contains(out, "succeeded=0 failed=0 skipped=3") {
		t.Errorf("a filesystem-trim run over volumes with nothing mounted: %s, want all three skipped", out)
	}
	if v := e.Call(t, "GET", "/v1/volumes/detached", "").Body; v["state"] != "detached" {
		t.Errorf("the run attached the detached volume: %v", v["state"])
	}
}

// syncFS flushes the filesystem mounted at dir down to its device.
func syncFS(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}
