package manager

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestWatchNotifiesOnEveryChange(t *testing.T) {
	data := randomBytes(t, 1<<20)
	m := startManager(t, "", "disk-a", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notices, err := m.client.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) {
		t.Helper()
		select {
		case <-notices:
		case <-time.After(5 * time.Second):
			t.Fatalf("no notice after %s", what)
		}
	}
	next("connecting")
	// After each change, a notice comes, and a List then shows the change.
	ds := startUpload(t, m.disk, "disk-a", "ubuntu", "u1", data)
	m.client.Fetch(ctx, "ubuntu", "u1", "", ds, 0)
	for {
		next("the fetch")
		list, err := m.client.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f := list["ubuntu"]; f != nil && f.State == longhorn.BackingImageStateReady {
			break
		}
	}
	if err := m.client.Delete(ctx, "ubuntu", "u1"); err != nil {
		t.Fatal(err)
	}
	next("the delete")
	if list, _ := m.client.List(ctx); len(list) != 0 {
		t.Fatalf("list after delete: %v", list)
	}
	cancel()
	select {
	case _, open := <-notices:
		for open {
			_, open = <-notices
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the notice channel stayed open after the context ended")
	}
}

func TestDeleteIsRefusedWhileAReplicaUsesTheFile(t *testing.T) {
	data := randomBytes(t, 1<<20)
	var mu sync.Mutex
	users := []string{"replica pvc-1-r-0"}
	m := startManager(t, "", "disk-a", func(c *Config) {
		c.InUse = func(name, uuid string) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			if name == "ubuntu" && uuid == "u1" {
				return users, nil
			}
			return nil, nil
		}
	})
	ds := startUpload(t, m.disk, "disk-a", "ubuntu", "u1", data)
	ctx := context.Background()
	m.client.Fetch(ctx, "ubuntu", "u1", "", ds, 0)
	wantState(t, waitFile(t, m.client, "ubuntu"), longhorn.BackingImageStateReady)

	err := m.client.Delete(ctx, "ubuntu", "u1")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "in use by [replica pvc-1-r-0]") {
		t.Fatalf("delete of a file in use: %v", err)
	}
	if got := m.fileBytes(t, "ubuntu", "u1"); len(got) != len(data) {
		t.Fatal("the refused delete touched the file")
	}
	mu.Lock()
	users = nil
	mu.Unlock()
	if err := m.client.Delete(ctx, "ubuntu", "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(backingimage.FileFolder(m.disk, "ubuntu", "u1")); !os.IsNotExist(err) {
		t.Fatal("the deleted file's folder is still there")
	}
	if err := m.client.Delete(ctx, "ubuntu", "u1"); err != nil {
		t.Fatalf("a repeated delete: %v", err)
	}
	if _, err := m.client.Get(ctx, "ubuntu", "u1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a deleted file: %v", err)
	}
}

func TestAManagerTouchesNoFileOnAnotherDisk(t *testing.T) {
	disk := newDisk(t, "disk-a")
	if _, err := New(Config{DiskPath: disk, DiskUUID: "disk-z", Log: quietLog()}); err == nil ||
		!strings.Contains(err.Error(), "has UUID disk-a, want disk-z") {
		t.Fatalf("a manager started for another disk: %v", err)
	}
	data := randomBytes(t, 1<<20)
	m := startManager(t, disk, "disk-a", nil)
	ds := startUpload(t, disk, "disk-a", "ubuntu", "u1", data)
	ctx := context.Background()
	m.client.Fetch(ctx, "ubuntu", "u1", "", ds, 0)
	wantState(t, waitFile(t, m.client, "ubuntu"), longhorn.BackingImageStateReady)

	// Another disk is mounted at the path.
	writeDiskUUID(t, disk, "disk-b")
	for name, call := range map[string]func() error{
		"delete": func() error { return m.client.Delete(ctx, "ubuntu", "u1") },
		"fetch":  func() error { _, err := m.client.Fetch(ctx, "debian", "u2", "", ds, 0); return err },
		"sync":   func() error { _, err := m.client.Sync(ctx, "debian", "u2", "", "127.0.0.1:1", 0); return err },
	} {
		if err := call(); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "has UUID disk-b, want disk-a") {
			t.Errorf("%s on a swapped disk: %v", name, err)
		}
	}
	if got := m.fileBytes(t, "ubuntu", "u1"); len(got) != len(data) {
		t.Fatal("the file on the swapped disk was touched")
	}
}

func TestBadRequestsNameTheFieldAndTheRule(t *testing.T) {
	m := startManager(t, "", "disk-a", nil)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		call func() error
		want string
	}{
		"name with a path":     {func() error { _, err := m.client.Fetch(ctx, "../etc", "u1", "", "x:1", 0); return err }, `name "../etc": must be a lower-case DNS subdomain`},
		"empty uuid":           {func() error { _, err := m.client.Fetch(ctx, "ubuntu", "", "", "x:1", 0); return err }, `uuid "": must be 1 to 64`},
		"short checksum":       {func() error { _, err := m.client.Sync(ctx, "ubuntu", "u1", "abc", "x:1", 0); return err }, `checksum "abc": must be a SHA512`},
		"sync from nowhere":    {func() error { _, err := m.client.Sync(ctx, "ubuntu", "u1", "", "", 0); return err }, "from_address: required"},
		"negative size":        {func() error { _, err := m.client.Fetch(ctx, "ubuntu", "u1", "", "x:1", -1); return err }, "size -1: must not be negative"},
		"delete by a bad name": {func() error { return m.client.Delete(ctx, "a/b", "u1") }, `name "a/b"`},
	} {
		err := tc.call()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an invalid-request error saying %q", name, err, tc.want)
		}
	}
	if v, min, err := m.client.VersionGet(ctx); err != nil || v != APIVersion || min != APIMinVersion {
		t.Errorf("version get: %d %d %v", v, min, err)
	}
}
