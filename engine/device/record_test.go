package device

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
)

// Nothing a record says is taken as it is: a field that could name
// something other than its volume's device is dropped.
func TestSanitizeKeepsOnlyWhatCanBeTheVolumes(t *testing.T) {
	log := logrus.NewEntry(logrus.StandardLogger())
	dir := "/var/lib/x/fuse/vol"
	got := Sanitize(&Record{VolumeID: "other", Endpoint: "file:///etc/passwd", FuseDir: "/etc", FuseFile: "/etc/shadow",
		NbdfusePID: 1, Device: "/dev/sda", Window: true}, "vol", dir, log)
	want := Record{VolumeID: "vol", FuseDir: dir, FuseFile: dir + "/disk", Window: true}
	if *got != want {
		t.Fatalf("sanitized: %+v, want %+v", *got, want)
	}
	ok := Record{VolumeID: "vol", Endpoint: "nbd://127.0.0.1:10000/vol", FuseDir: dir, FuseFile: dir + "/disk", NbdfusePID: 4242, Device: "/dev/loop3"}
	if got := Sanitize(&ok, "vol", dir, log); *got != ok {
		t.Fatalf("a sound record: %+v, want it as it is", *got)
	}
	if health(&want) == "" {
		t.Fatal("a record of no device says healthy")
	}
}

// A record whose file name is no volume's is not read; a record that is
// no JSON is an error, not a device.
func TestRecordsOfNoVolumeAreNotRead(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(dir, logrus.NewEntry(logrus.StandardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Not A Volume.json"), []byte(`{"device":"/dev/sda"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.List(ctx); err == nil {
		t.Fatal("List with a broken record: no error")
	}
	os.Remove(filepath.Join(dir, "broken.json"))
	if list, err := m.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if _, err := m.Get(ctx, "../x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Get of no volume name: %v", err)
	}
}
