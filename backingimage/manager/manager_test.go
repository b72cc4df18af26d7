package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func wantState(t *testing.T, info *FileInfo, state longhorn.BackingImageState, fragments ...string) {
	t.Helper()
	if info.State != state {
		t.Fatalf("file %s is %s (%s), want %s", info.Name, info.State, info.Message, state)
	}
	for _, f := range fragments {
		if !strings.Contains(info.Message, f) {
			t.Errorf("message %q does not say %q", info.Message, f)
		}
	}
}

func TestFetchTakesTheDataSourceFileOnTheSameDisk(t *testing.T) {
	data := randomBytes(t, 3<<20)
	m := startManager(t, "", "disk-a", nil)
	ds := startUpload(t, m.disk, "disk-a", "ubuntu", "u1", data)
	ctx := context.Background()
	if _, err := m.client.Fetch(ctx, "ubuntu", "u1", sha(data), ds, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	info := waitFile(t, m.client, "ubuntu")
	wantState(t, info, longhorn.BackingImageStateReady, "taken from the data source")
	if info.CurrentChecksum != sha(data) || info.Size != int64(len(data)) || info.VirtualSize != int64(len(data)) || info.Progress != 100 {
		t.Fatalf("info %+v, want the raw file's size as its virtual size", info)
	}
	if got := m.fileBytes(t, "ubuntu", "u1"); string(got) != string(data) {
		t.Fatal("the fetched file differs from the upload")
	}
	if entries := m.folderEntries("ubuntu", "u1"); strings.Join(entries, ",") != "backing,backing.cfg" {
		t.Errorf("the file's folder holds %v, want the data and its record", entries)
	}
	if _, err := os.Stat(filepath.Join(m.disk, backingimage.TempFolder, "ubuntu-u1", "backing")); !os.IsNotExist(err) {
		t.Error("the data source's file is still in its temporary folder: it was copied, not taken")
	}
	// A repeated Fetch answers the ready file.
	again, err := m.client.Fetch(ctx, "ubuntu", "u1", sha(data), ds, 0)
	if err != nil || again.State != longhorn.BackingImageStateReady {
		t.Fatalf("repeated fetch: %+v, %v", again, err)
	}
}

func TestFetchStreamsFromADataSourceOnAnotherDisk(t *testing.T) {
	data := randomBytes(t, 2<<20+5)
	other := newDisk(t, "disk-b")
	ds := startUpload(t, other, "disk-b", "ubuntu", "u1", data)
	m := startManager(t, "", "disk-a", nil)
	if _, err := m.client.Fetch(context.Background(), "ubuntu", "u1", "", ds, 0); err != nil {
		t.Fatal(err)
	}
	info := waitFile(t, m.client, "ubuntu")
	wantState(t, info, longhorn.BackingImageStateReady, "copied from the data source")
	if info.CurrentChecksum != sha(data) || string(m.fileBytes(t, "ubuntu", "u1")) != string(data) {
		t.Fatal("the copied file differs from the upload")
	}
}

func TestFetchWithAnotherChecksumFailsAndKeepsNothing(t *testing.T) {
	data := randomBytes(t, 1<<20)
	m := startManager(t, "", "disk-a", nil)
	ds := startUpload(t, m.disk, "disk-a", "ubuntu", "u1", data)
	wrong := strings.Repeat("e", 128)
	if _, err := m.client.Fetch(context.Background(), "ubuntu", "u1", wrong, ds, 0); err != nil {
		t.Fatal(err)
	}
	wantState(t, waitFile(t, m.client, "ubuntu"), longhorn.BackingImageStateFailed, "checksum mismatch", "want "+wrong)
	if entries := m.folderEntries("ubuntu", "u1"); len(entries) != 0 {
		t.Errorf("a failed fetch left %v", entries)
	}
}

func TestFetchReusesAMatchingFileAfterARestart(t *testing.T) {
	data := randomBytes(t, 1<<20)
	disk := newDisk(t, "disk-a")
	first := startManager(t, disk, "disk-a", nil)
	ds := startUpload(t, disk, "disk-a", "ubuntu", "u1", data)
	if _, err := first.client.Fetch(context.Background(), "ubuntu", "u1", "", ds, 0); err != nil {
		t.Fatal(err)
	}
	wantState(t, waitFile(t, first.client, "ubuntu"), longhorn.BackingImageStateReady)
	first.srv.Close()

	// Leave a half-written folder behind, as a crash would.
	half := backingimage.FileFolder(disk, "debian", "u2")
	os.MkdirAll(half, 0o755)
	os.WriteFile(filepath.Join(half, ".backing.part-1"), data[:100], 0o644)

	second := startManager(t, disk, "disk-a", nil)
	if _, err := os.Stat(half); !os.IsNotExist(err) {
		t.Error("a folder without a complete file survived the restart")
	}
	info, err := second.client.Get(context.Background(), "ubuntu", "u1")
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, info, longhorn.BackingImageStateUnknown, "not verified")
	if _, err := second.client.Fetch(context.Background(), "ubuntu", "u1", sha(data), "", 0); err != nil {
		t.Fatal(err)
	}
	wantState(t, waitFile(t, second.client, "ubuntu"), longhorn.BackingImageStateReady, "reused the file on the disk")

	// A file that no longer hashes right is not reused, and with no data
	// source to fetch from, the fetch fails.
	third := startManager(t, disk, "disk-a", nil)
	path := filepath.Join(backingimage.FileFolder(disk, "ubuntu", "u1"), backingimage.DataFile)
	corrupt := append([]byte{}, data...)
	corrupt[10] ^= 0xff
	os.WriteFile(path, corrupt, 0o644)
	if _, err := third.client.Fetch(context.Background(), "ubuntu", "u1", sha(data), "", 0); err != nil {
		t.Fatal(err)
	}
	wantState(t, waitFile(t, third.client, "ubuntu"), longhorn.BackingImageStateFailed, "no complete file on the disk to reuse")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("the corrupt file is still on the disk")
	}
}

func TestSyncBetweenTwoManagers(t *testing.T) {
	data := randomBytes(t, 5<<20+1)
	a := startManager(t, "", "disk-a", nil)
	b := startManager(t, "", "disk-b", nil)
	ds := startUpload(t, a.disk, "disk-a", "ubuntu", "u1", data)
	ctx := context.Background()
	a.client.Fetch(ctx, "ubuntu", "u1", sha(data), ds, 0)
	wantState(t, waitFile(t, a.client, "ubuntu"), longhorn.BackingImageStateReady)

	if _, err := b.client.Sync(ctx, "ubuntu", "u1", sha(data), a.address, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	info := waitFile(t, b.client, "ubuntu")
	wantState(t, info, longhorn.BackingImageStateReady, "synced from "+a.address)
	if string(b.fileBytes(t, "ubuntu", "u1")) != string(data) {
		t.Fatal("the synced file differs")
	}

	t.Run("wrong checksum", func(t *testing.T) {
		c := startManager(t, "", "disk-c", nil)
		wrong := strings.Repeat("a", 128)
		c.client.Sync(ctx, "ubuntu", "u1", wrong, a.address, 0)
		wantState(t, waitFile(t, c.client, "ubuntu"), longhorn.BackingImageStateFailed, "checksum mismatch")
		if entries := c.folderEntries("ubuntu", "u1"); len(entries) != 0 {
			t.Errorf("a failed sync left %v", entries)
		}
	})
	t.Run("file the sender lacks", func(t *testing.T) {
		c := startManager(t, "", "disk-c", nil)
		c.client.Sync(ctx, "debian", "u9", "", a.address, 0)
		wantState(t, waitFile(t, c.client, "debian"), longhorn.BackingImageStateFailed, "no ready file of it")
	})
	t.Run("another UUID under the same name", func(t *testing.T) {
		_, err := b.client.Sync(ctx, "ubuntu", "u2", "", a.address, 0)
		if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "delete it before") {
			t.Fatalf("sync of a new UUID over an old file: %v", err)
		}
	})
}

func TestAManagerSendsAtMostThreeFilesAtOnce(t *testing.T) {
	data := randomBytes(t, 32<<20)
	a := startManager(t, "", "disk-a", nil)
	ds := startUpload(t, a.disk, "disk-a", "ubuntu", "u1", data)
	ctx := context.Background()
	a.client.Fetch(ctx, "ubuntu", "u1", "", ds, 0)
	wantState(t, waitFile(t, a.client, "ubuntu"), longhorn.BackingImageStateReady)

	// Three readers that take the header and then read nothing hold the
	// three send slots (flow control blocks the sender).
	peer := pb.NewBackingImageManagerClient(a.client.conn)
	holdCtx, release := context.WithCancel(ctx)
	defer release()
	for range 3 {
		stream, err := peer.Send(holdCtx, &pb.FileRequest{Name: "ubuntu", Uuid: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	b := startManager(t, "", "disk-b", nil)
	b.client.Sync(ctx, "ubuntu", "u1", "", a.address, 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, _ := b.client.Get(ctx, "ubuntu", "u1")
		if strings.Contains(info.Message, "sends 3 files already") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fourth receiver was not told to wait: %+v", info)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if info, _ := a.client.Get(ctx, "ubuntu", "u1"); info.Sending != 3 {
		t.Errorf("the sender reports %d sends, want 3", info.Sending)
	}
	release()
	wantState(t, waitFile(t, b.client, "ubuntu"), longhorn.BackingImageStateReady)
}
