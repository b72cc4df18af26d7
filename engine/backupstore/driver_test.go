package backupstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
)

// testTarget is one backup target a test runs on.
type testTarget struct {
	// Target is the backup-target URL and Credential the data of its
	// backup-target-credential-secret (nil for file://).
	Target     string
	Credential map[string]string
	Driver     Driver
	// S3 is the server of an s3:// target (nil for file://), for fault
	// tests: S3.Stop(t) and S3.Start(t) kill and restart it.
	S3 *s3test.Server
}

// testTargets returns a fresh, empty target of every kind the store runs
// on, by name: "file" (a temporary directory) and "s3" (a path in a
// bucket of a versitygw started for the test, stopped when it ends).
func testTargets(t testing.TB) map[string]testTarget {
	t.Helper()
	root := t.TempDir()
	srv := s3test.Start(t)
	s3Target := srv.Target("cluster-a/")
	d, err := NewDriver(s3Target, srv.Credential())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]testTarget{
		"file": {Target: "file://" + root, Driver: &FileDriver{Root: root}},
		"s3":   {Target: s3Target, Credential: srv.Credential(), Driver: d, S3: srv},
	}
}

// testDrivers returns the driver of every target testTargets makes.
func testDrivers(t testing.TB) map[string]Driver {
	t.Helper()
	out := map[string]Driver{}
	for name, tt := range testTargets(t) {
		out[name] = tt.Driver
	}
	return out
}

// testStores returns a store on every target testTargets makes.
func testStores(t testing.TB) map[string]*Store {
	t.Helper()
	out := map[string]*Store{}
	for name, tt := range testTargets(t) {
		out[name] = NewStore(tt.Target, tt.Driver)
	}
	return out
}

func mustWrite(t *testing.T, d Driver, key string, data []byte) {
	t.Helper()
	if err := d.Write(key, data); err != nil {
		t.Fatalf("Write(%q): %v", key, err)
	}
}

func mustRead(t *testing.T, d Driver, key string, want []byte) {
	t.Helper()
	got, err := d.Read(key, maxBlockFileSize)
	if err != nil {
		t.Fatalf("Read(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Read(%q): %d bytes, not the %d written", key, len(got), len(want))
	}
}

func mustList(t *testing.T, d Driver, prefix string, want ...string) {
	t.Helper()
	got, err := d.List(prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
	}
}

func mustExist(t *testing.T, d Driver, key string, want bool) {
	t.Helper()
	ok, err := d.Exists(key)
	if err != nil || ok != want {
		t.Fatalf("Exists(%q) = %v, %v; want %v", key, ok, err, want)
	}
}

// TestDriverConformance holds every driver to the five calls' contract.
func TestDriverConformance(t *testing.T) {
	for name, d := range testDrivers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const vol = "backupstore/volumes/vol-1"
			sum := "ab" + "cd" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
			block := vol + "/blocks/ab/cd/" + sum + ".blk"

			// Nothing there yet.
			mustList(t, d, "")
			mustList(t, d, "backupstore/volumes")
			mustExist(t, d, vol+"/volume.cfg", false)
			if _, err := d.Read(vol+"/volume.cfg", maxRecordSize); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Read of a missing key: %v, want ErrNotExist", err)
			}

			// Write, read, overwrite.
			mustWrite(t, d, vol+"/volume.cfg", []byte(`{"name":"vol-1"}`))
			mustRead(t, d, vol+"/volume.cfg", []byte(`{"name":"vol-1"}`))
			mustWrite(t, d, vol+"/volume.cfg", []byte(`{"name":"vol-1","size":1}`))
			mustRead(t, d, vol+"/volume.cfg", []byte(`{"name":"vol-1","size":1}`))
			mustExist(t, d, vol+"/volume.cfg", true)
			mustWrite(t, d, vol+"/empty", nil)
			mustRead(t, d, vol+"/empty", []byte{})

			// A 2 MiB block under the project's layout.
			big := random(7, BlockSize)
			mustWrite(t, d, block, big)
			mustRead(t, d, block, big)
			mustExist(t, d, block, true)
			for i := 0; i < 3; i++ {
				mustWrite(t, d, fmt.Sprintf("%s/backups/backup_b%d.cfg", vol, i), []byte("{}"))
			}
			mustWrite(t, d, "backupstore/volumes/vol-2/volume.cfg", []byte("{}"))

			// List: one level, objects and "directories", with or
			// without a trailing slash; a missing prefix is empty.
			mustList(t, d, "", "backupstore")
			mustList(t, d, "backupstore", "backupstore/volumes")
			mustList(t, d, "backupstore/volumes", vol, "backupstore/volumes/vol-2")
			mustList(t, d, "backupstore/volumes/", vol, "backupstore/volumes/vol-2")
			mustList(t, d, vol, vol+"/backups", vol+"/blocks", vol+"/empty", vol+"/volume.cfg")
			mustList(t, d, vol+"/blocks", vol+"/blocks/ab")
			mustList(t, d, vol+"/blocks/ab/cd", block)
			mustList(t, d, vol+"/backups", vol+"/backups/backup_b0.cfg", vol+"/backups/backup_b1.cfg", vol+"/backups/backup_b2.cfg")
			mustList(t, d, "backupstore/volumes/missing")
			mustList(t, d, vol+"/volume") // a prefix of a key is not its directory

			// Delete; a missing key is no error.
			if err := d.Delete(vol + "/backups/backup_b1.cfg"); err != nil {
				t.Fatal(err)
			}
			if err := d.Delete(vol + "/backups/backup_b1.cfg"); err != nil {
				t.Fatalf("Delete of a missing key: %v", err)
			}
			if err := d.Delete("backupstore/nothing/here"); err != nil {
				t.Fatalf("Delete of a missing key: %v", err)
			}
			mustExist(t, d, vol+"/backups/backup_b1.cfg", false)
			mustList(t, d, vol+"/backups", vol+"/backups/backup_b0.cfg", vol+"/backups/backup_b2.cfg")
			if _, err := d.Read(vol+"/backups/backup_b1.cfg", maxRecordSize); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Read of a deleted key: %v, want ErrNotExist", err)
			}
			if err := d.Delete(block); err != nil {
				t.Fatal(err)
			}
			mustExist(t, d, block, false)

			// An object over the reader's cap is refused, not read.
			if _, err := d.Read(vol+"/volume.cfg", 4); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than the 4 bytes") {
				t.Fatalf("Read over the cap: %v, want ErrInvalid naming the cap", err)
			}
			// A key under an object is missing, as under no folder.
			mustList(t, d, vol+"/volume.cfg")
			mustExist(t, d, vol+"/volume.cfg/x", false)
			if _, err := d.Read(vol+"/volume.cfg/x", maxRecordSize); !errors.Is(err, ErrNotExist) {
				t.Fatalf("Read under an object: %v, want ErrNotExist", err)
			}
		})
	}
}
