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

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// replicaHeadsAllocated is the bytes on disk of the head files of a
// volume's replicas, and how many replicas there are.
func replicaHeadsAllocated(t *testing.T, e *csiNodeEnv, volume string) (int64, int) {
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
		heads, _ := filepath.Glob(filepath.Join(replicaDir(r), "volume-head-*.img"))
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
// mounted filesystem and deleted, then fstrim on the mount (what the
// filesystem-trim task and the trimFilesystem action run), and the
// replicas' heads give the space back. The discards go from the loop
// device to nbdfuse's file (a punched hole), to the NBD export (TRIM),
// to each replica (a hole punched in its head). The file kept reads back.
func TestFstrimOnTheMountGivesTheReplicasSpaceBack(t *testing.T) {
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
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = byte(i*7 + i/4096)
	}
	if err := os.WriteFile(filepath.Join(staging, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	syncFS(t, staging)
	written, replicas := replicaHeadsAllocated(t, e, "trimmed")
	if replicas != 1 || written < 64<<20 {
		t.Fatalf("%d replicas hold %d bytes after 64 MiB was written, want one holding at least 64 MiB", replicas, written)
	}

	if err := os.Remove(filepath.Join(staging, "big.bin")); err != nil {
		t.Fatal(err)
	}
	syncFS(t, staging)
	if out, err := exec.Command("fstrim", "-v", staging).CombinedOutput(); err != nil {
		t.Fatalf("fstrim: %v: %s", err, out)
	} else {
		t.Logf("fstrim: %s", strings.TrimSpace(string(out)))
	}
	trimmed, _ := replicaHeadsAllocated(t, e, "trimmed")
	t.Logf("the replica's head: %d bytes after the write, %d after fstrim", written, trimmed)
	if written-trimmed < 60<<20 {
		t.Errorf("the replica's head holds %d bytes after fstrim, %d before: want the 64 MiB deleted given back", trimmed, written)
	}
	if got, err := os.ReadFile(filepath.Join(staging, "keep.txt")); err != nil || !bytes.Equal(got, keep) {
		t.Errorf("the file kept reads %d bytes, %v; want what was written", len(got), err)
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
