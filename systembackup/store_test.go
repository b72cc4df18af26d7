package systembackup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

func TestASystemBackupIsStoredListedReadAndDeletedInLonghornsLayout(t *testing.T) {
	root := t.TempDir()
	d, err := backupstore.NewDriver("file://"+root, nil)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := Build("sb-1", sample())
	if err != nil {
		t.Fatal(err)
	}
	made := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	if err := Upload(d, Config{Name: "sb-1", LonghornVersion: "v1.9.0", BackupTargetURL: "file://" + root, CreatedAt: made}, archive); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ZipFile, ConfigFile} {
		if _, err := os.Stat(filepath.Join(root, "backupstore/system-backups/v1.9.0/sb-1", f)); err != nil {
			t.Fatal(err)
		}
	}
	// Another system backup of the same name is not overwritten; the
	// same one (an upload started again) is.
	if err := Upload(d, Config{Name: "sb-1", LonghornVersion: "v1.9.0", CreatedAt: time.Unix(1, 0)}, []byte("other")); !errors.Is(err, ErrOther) {
		t.Fatalf("an upload over another system backup: %v", err)
	}
	if err := Upload(d, Config{Name: "sb-1", LonghornVersion: "v1.9.0", BackupTargetURL: "file://" + root, CreatedAt: made}, archive); err != nil {
		t.Fatalf("the same upload again: %v", err)
	}
	list, err := List(d)
	if err != nil || len(list) != 1 || list["sb-1"] != "v1.9.0" {
		t.Fatalf("List = %v, %v", list, err)
	}
	cfg, err := LoadConfig(d, "v1.9.0", "sb-1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Download(d, cfg)
	if err != nil || string(got) != string(archive) {
		t.Fatalf("Download = %d bytes, %v", len(got), err)
	}

	// An archive changed in the target does not match its record.
	if err := os.WriteFile(filepath.Join(root, "backupstore/system-backups/v1.9.0/sb-1", ZipFile), append(got, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Download(d, cfg); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Download of a changed archive = %v, want a checksum error", err)
	}

	// Deleting another system backup of the name (another creation
	// time) leaves this one.
	if err := Delete(d, "v1.9.0", "sb-1", time.Unix(1, 0)); !errors.Is(err, ErrOther) {
		t.Fatalf("Delete of another system backup of the name: %v, want ErrOther", err)
	}
	if _, err := LoadConfig(d, "v1.9.0", "sb-1"); err != nil {
		t.Fatalf("the system backup after another's deletion: %v", err)
	}
	if err := Delete(d, "v1.9.0", "sb-1", cfg.CreatedAt.Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(d, "v1.9.0", "sb-1"); !errors.Is(err, backupstore.ErrNotExist) {
		t.Fatalf("LoadConfig after Delete = %v, want not found", err)
	}
}

func TestARecordThatIsNotItsDirectorysIsRefused(t *testing.T) {
	root := t.TempDir()
	d, err := backupstore.NewDriver("file://"+root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, cfg, want string }{
		{"not JSON", "{", "system-backup.cfg"},
		{"another name", `{"Name":"other","LonghornVersion":"v1","Checksum":"` + strings.Repeat("a", 128) + `"}`, "not the directory"},
		{"no checksum", `{"Name":"sb","LonghornVersion":"v1"}`, "not a SHA-512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := d.Write(ConfigKey("v1", "sb"), []byte(tc.cfg)); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadConfig(d, "v1", "sb"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadConfig = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := LoadConfig(d, "..", "sb"); err == nil {
		t.Fatal("a version .. was read")
	}
}
