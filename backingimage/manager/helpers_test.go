package manager

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// newDisk makes a folder that looks like a node's disk.
func newDisk(t testing.TB, uuid string) string {
	t.Helper()
	dir := t.TempDir()
	writeDiskUUID(t, dir, uuid)
	return dir
}

func writeDiskUUID(t testing.TB, dir, uuid string) {
	t.Helper()
	cfg := fmt.Sprintf(`{"diskName":"d","diskUUID":%q}`, uuid)
	if err := os.WriteFile(filepath.Join(dir, backingimage.DiskConfigFile), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha512.Sum512(b)
	return hex.EncodeToString(s[:])
}

// node is one running manager.
type node struct {
	srv     *Server
	client  *Client
	address string
	disk    string
	uuid    string
}

// startManager serves a manager of disk (a new one when empty) on a
// 127.0.0.1 port.
func startManager(t testing.TB, disk, diskUUID string, tweak func(*Config)) *node {
	t.Helper()
	if disk == "" {
		disk = newDisk(t, diskUUID)
	}
	cfg := Config{DiskPath: disk, DiskUUID: diskUUID, Log: quietLog(), SyncRetryInterval: 10 * time.Millisecond, TLS: mtlstest.Identity(t)}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := srv.GRPCServer()
	go g.Serve(lis)
	client, err := NewClient(lis.Addr().String(), 10*time.Second, mtlstest.Identity(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		srv.Close()
		g.Stop()
	})
	return &node{srv: srv, client: client, address: lis.Addr().String(), disk: disk, uuid: diskUUID}
}

// startUpload runs a data source of the image on disk and uploads data.
func startUpload(t testing.TB, disk, diskUUID, name, uuid string, data []byte) string {
	t.Helper()
	ds, err := datasource.New(datasource.Config{Name: name, UUID: uuid, DiskPath: disk, DiskUUID: diskUUID,
		SourceType: longhorn.BackingImageDataSourceTypeUpload, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ds.Close)
	address := mtlstest.ServeHTTPS(t, ds.Handler())
	if _, err := datasource.NewClient(address, mtlstest.Identity(t)).Upload(context.Background(), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return address
}

// waitFile polls until the file is ready or failed.
func waitFile(t testing.TB, c *Client, name string) *FileInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.Get(context.Background(), name, "")
		if err != nil {
			t.Fatal(err)
		}
		if info.State == longhorn.BackingImageStateReady || info.State == longhorn.BackingImageStateFailed {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("file %s still %s: %+v", name, info.State, info)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fileBytes reads a file's data on a manager's disk.
func (n *node) fileBytes(t testing.TB, name, uuid string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(backingimage.FileFolder(n.disk, name, uuid), backingimage.DataFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// folderEntries lists a file's folder.
func (n *node) folderEntries(name, uuid string) []string {
	entries, _ := os.ReadDir(backingimage.FileFolder(n.disk, name, uuid))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
