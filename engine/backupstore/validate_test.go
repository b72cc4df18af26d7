package backupstore

import (
	"strings"
	"testing"
)

// TestMalformedConfigsAreRefusedNotTrusted: every field read from a target
// is untrusted. A config that names a block by an empty checksum, or an
// offset near 2^63, gets a clear error naming the field; nothing panics.
func TestMalformedConfigsAreRefusedNotTrusted(t *testing.T) {
	good := `{"name":"b1","volumeName":"vol","volumeSize":4194304,"snapshotName":"s1","createdAt":"2026-11-23T10:00:00Z","compression":"gzip","blocks":[{"offset":0,"checksum":"` + strings.Repeat("a", 64) + `"}]}`
	for _, c := range []struct {
		name, cfg, want string
	}{
		{"empty checksum", strings.Replace(good, strings.Repeat("a", 64), "", 1), "blocks[0].checksum"},
		{"short checksum", strings.Replace(good, strings.Repeat("a", 64), "a", 1), "blocks[0].checksum"},
		{"checksum with a path", strings.Replace(good, strings.Repeat("a", 64), "../../"+strings.Repeat("a", 58), 1), "blocks[0].checksum"},
		{"offset near 2^63", strings.Replace(good, `"offset":0`, `"offset":9223372036854775807`, 1), "blocks[0].offset"},
		{"negative offset", strings.Replace(good, `"offset":0`, `"offset":-2097152`, 1), "blocks[0].offset"},
		{"unaligned offset", strings.Replace(good, `"offset":0`, `"offset":4096`, 1), "blocks[0].offset"},
		{"offset past the volume", strings.Replace(good, `"offset":0`, `"offset":4194304`, 1), "blocks[0].offset"},
		{"negative size", strings.Replace(good, `"volumeSize":4194304`, `"volumeSize":-1`, 1), "volumeSize"},
		{"huge size", strings.Replace(good, `"volumeSize":4194304`, `"volumeSize":9223372036854775807`, 1), "volumeSize"},
		{"other name", strings.Replace(good, `"name":"b1"`, `"name":"b2"`, 1), "name"},
		{"other volume", strings.Replace(good, `"volumeName":"vol"`, `"volumeName":"x"`, 1), "volumeName"},
		{"unknown compression", strings.Replace(good, `"gzip"`, `"zstd"`, 1), "compression"},
		{"repeated block", strings.Replace(good, `}]}`, `},{"offset":0,"checksum":"`+strings.Repeat("b", 64)+`"}]}`, 1), "blocks[1].offset"},
		{"not JSON", `{"name":`, "corrupt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newStore(t)
			if err := s.driver.Write(backupCfgKey("vol", "b1"), []byte(c.cfg)); err != nil {
				t.Fatal(err)
			}
			_, err := s.Get("vol", "b1")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Get: %v, want an error naming %s", err, c.want)
			}
			if _, err := restoreBytes(s, "vol", "b1", 4<<20); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Restore: %v, want an error naming %s", err, c.want)
			}
			if _, err := s.List("vol"); err == nil {
				t.Fatal("List trusted a malformed config")
			}
		})
	}
	s, _ := newStore(t)
	if err := s.driver.Write(backupCfgKey("vol", "b1"), []byte(good)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("vol", "b1"); err != nil {
		t.Fatalf("a good config: %v", err)
	}
}

// TestNamesFromOutsideStayInTheTarget: a volume or backup name from a URL
// or a listing never leaves the volume's folder.
func TestNamesFromOutsideStayInTheTarget(t *testing.T) {
	s, _ := newStore(t)
	for _, bad := range []string{"", "..", "../etc", "a/b", ".hidden", strings.Repeat("v", 300), "v\x00"} {
		if _, err := s.Get(bad, "b1"); err == nil || !strings.Contains(err.Error(), "volume name") {
			t.Errorf("Get(volume %q): %v", bad, err)
		}
		if _, err := s.Get("vol", bad); err == nil || !strings.Contains(err.Error(), "backup name") {
			t.Errorf("Get(backup %q): %v", bad, err)
		}
		if err := s.Delete("vol", bad); err == nil || !strings.Contains(err.Error(), "backup name") {
			t.Errorf("Delete(backup %q): %v", bad, err)
		}
		if _, err := restoreBytes(s, bad, "b1", 4096); err == nil || !strings.Contains(err.Error(), "volume name") {
			t.Errorf("Restore(volume %q): %v", bad, err)
		}
	}
	if _, _, _, err := ParseURL("file:///t?backup=b1&volume=../../etc"); err == nil || !strings.Contains(err.Error(), "volume name") {
		t.Errorf("ParseURL with a path in the volume: %v", err)
	}
}
