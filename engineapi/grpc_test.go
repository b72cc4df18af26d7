package engineapi

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	"github.com/cadence-storage/longhorn-manager/engine/rpc/rpctest"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// serve runs the engine service on loopback with one volume of two
// replicas and returns a client of it.
func serve(t *testing.T) (*GRPCClient, *volumeengine.Engine) {
	t.Helper()
	return serveVolume(t, "vol")
}

func serveVolume(t *testing.T, volume string) (*GRPCClient, *volumeengine.Engine) {
	t.Helper()
	e := rpctest.Engine(t, volume, 4<<20, clock.RealClock{}, "r1", "r2")
	c, err := NewGRPCClient(rpctest.Serve(t, e), volume, 5*time.Second, mtlstest.Identity(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, e
}

func TestSnapshotLifecycleOverGRPC(t *testing.T) {
	c, e := serve(t)
	ctx := context.Background()
	v, err := c.VolumeGet(ctx)
	if err != nil || v.Size != 4<<20 || v.ReplicaModes["r1"] != longhorn.ReplicaModeRW || len(v.ReplicaModes) != 2 {
		t.Fatalf("volume %+v, %v", v, err)
	}
	e.WriteAt([]byte("first"), 0)
	if name, err := c.SnapshotCreate(ctx, "s1", map[string]string{"RecurringJob": "hourly"}); err != nil || name != "s1" {
		t.Fatalf("create: %q, %v", name, err)
	}
	e.WriteAt([]byte("second"), 0)
	generated, err := c.SnapshotCreate(ctx, "", nil)
	if err != nil || generated == "" {
		t.Fatalf("create with a generated name: %q, %v", generated, err)
	}
	list, err := c.SnapshotList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list["s1"] == nil || list["volume-head"] == nil || list["volume-head"].Parent != generated ||
		!list["s1"].Children[generated] || list["s1"].Labels["RecurringJob"] != "hourly" || !list["s1"].UserCreated {
		t.Fatalf("list %+v", list)
	}
	if _, err := c.SnapshotCreate(ctx, "s1", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a duplicate name: %v", err)
	}
	if _, err := c.SnapshotGet(ctx, "nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "volume vol") {
		t.Fatalf("get missing: %v", err)
	}

	e.SetFrontend(true)
	if err := c.SnapshotRevert(ctx, "s1"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("revert with a frontend: %v", err)
	}
	e.SetFrontend(false)
	if err := c.SnapshotRevert(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	e.ReadAt(buf, 0)
	if string(buf[:5]) != "first" {
		t.Fatalf("after revert: %q", buf)
	}

	if err := c.SnapshotDelete(ctx, generated); err != nil {
		t.Fatal(err)
	}
	if s, err := c.SnapshotGet(ctx, generated); err != nil || !s.Removed {
		t.Fatalf("deleted snapshot %+v, %v", s, err)
	}
	if err := c.SnapshotPurge(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := c.SnapshotPurgeStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if !s.IsPurging && s.State == "complete" {
				if _, err := c.SnapshotGet(ctx, generated); !errors.Is(err, ErrNotFound) {
					t.Fatalf("purged snapshot still listed: %v", err)
				}
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("purge did not complete")
}

func TestUnknownVolumeAndUnreachableEngine(t *testing.T) {
	c, _ := serve(t)
	other, err := NewGRPCClient(c.address, "other", time.Second, mtlstest.Identity(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.VolumeGet(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a volume without an engine: %v", err)
	}
	// Nothing listens here: the call ends with a clear error, by its
	// deadline at the latest.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	gone, err := NewGRPCClient(addr, "vol", 500*time.Millisecond, mtlstest.Identity(t))
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if _, err := gone.SnapshotList(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an unreachable engine: %v", err)
	}
}

func TestBackupAndRestoreOverGRPC(t *testing.T) {
	c, e := serve(t)
	ctx := context.Background()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i % 251)
	}
	e.WriteAt(data, 4096)
	if _, err := c.SnapshotCreate(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	target := "file://" + t.TempDir()
	if _, err := c.SnapshotBackup(ctx, BackupRequest{Snapshot: "missing", Target: target}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("backup of a missing snapshot: %v", err)
	}
	if _, err := c.SnapshotBackup(ctx, BackupRequest{Snapshot: "s1", Target: "ftp://x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("backup to an unsupported target: %v", err)
	}
	if _, err := c.SnapshotBackup(ctx, BackupRequest{Snapshot: "s1", Target: target, Compression: "zstd"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "backup-compression-method") {
		t.Fatalf("backup with an unknown compression: %v", err)
	}
	name, err := c.SnapshotBackup(ctx, BackupRequest{Name: "backup-one", Snapshot: "s1", Target: target, Labels: map[string]string{"RecurringJob": "nightly"},
		Compression: "gzip", Concurrency: 3})
	if err != nil || name != "backup-one" {
		t.Fatalf("backup: %q, %v", name, err)
	}
	var url string
	deadline := time.Now().Add(10 * time.Second)
	for url == "" && time.Now().Before(deadline) {
		st, err := c.BackupStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b := st["backup-one"]; b != nil && b.State == "Completed" {
			url = b.BackupURL
		} else if b != nil && b.State == "Error" {
			t.Fatalf("backup failed: %s", b.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(url, "backup=backup-one") || !strings.Contains(url, "volume=vol") {
		t.Fatalf("backup URL %q", url)
	}
	if store, err := backupstore.Open(target); err != nil {
		t.Fatal(err)
	} else if info, err := store.Get("vol", "backup-one"); err != nil || info.Compression != "gzip" {
		t.Fatalf("the backup taken with gzip: %+v, %v", info, err)
	}

	// Restore into a second, new volume served by another engine.
	c2, e2 := serveVolume(t, "restored")
	if err := c2.BackupRestore(ctx, url, nil); err != nil {
		t.Fatal(err)
	}
	st, err := c2.RestoreStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.IsRestoring || s.State != "complete" || s.LastRestored != "backup-one" || s.Progress != 100 {
			t.Fatalf("restore status %+v", s)
		}
	}
	got := make([]byte, len(data))
	e2.ReadAt(got, 4096)
	if string(got) != string(data) {
		t.Fatal("the restored volume differs from the snapshot")
	}
	if err := c2.BackupRestore(ctx, target+"?backup=nope&volume=vol", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore of a missing backup: %v", err)
	}
}

// The backup-target-credential-secret's data travels with the request to
// the engine, which opens the S3 target with it.
func TestBackupAndRestoreOverGRPCToS3(t *testing.T) {
	srv := s3test.Start(t)
	c, e := serve(t)
	ctx := context.Background()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i % 253)
	}
	e.WriteAt(data, 8192)
	if _, err := c.SnapshotCreate(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	target := srv.Target("cluster")
	noSecret := srv.Credential()
	delete(noSecret, "AWS_SECRET_ACCESS_KEY")
	if _, err := c.SnapshotBackup(ctx, BackupRequest{Snapshot: "s1", Target: target, Credential: noSecret}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY is missing") {
		t.Fatalf("backup with a credential lacking its secret: %v", err)
	}
	if _, err := c.SnapshotBackup(ctx, BackupRequest{Name: "backup-s3", Snapshot: "s1", Target: target, Credential: srv.Credential()}); err != nil {
		t.Fatal(err)
	}
	var url string
	deadline := time.Now().Add(10 * time.Second)
	for url == "" && time.Now().Before(deadline) {
		st, err := c.BackupStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b := st["backup-s3"]; b != nil && b.State == "Completed" {
			url = b.BackupURL
		} else if b != nil && b.State == "Error" {
			t.Fatalf("backup failed: %s", b.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(url, target+"?") {
		t.Fatalf("backup URL %q", url)
	}

	c2, e2 := serveVolume(t, "restored")
	wrong := srv.Credential()
	wrong["AWS_SECRET_ACCESS_KEY"] = "wrong"
	if err := c2.BackupRestore(ctx, url, wrong); err == nil || !strings.Contains(err.Error(), "access denied: check the backup-target-credential-secret") {
		t.Fatalf("restore with a wrong secret: %v", err)
	}
	if err := c2.BackupRestore(ctx, url, srv.Credential()); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	e2.ReadAt(got, 8192)
	if string(got) != string(data) {
		t.Fatal("the volume restored from S3 differs from the snapshot")
	}
}
