package diskconfig

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTellsAMissingConfigFromABadOne(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a disk without a config: %v", err)
	}
	for content, want := range map[string]string{"{": "corrupt", `{"diskName":"d"}`: "no diskUUID"} {
		if err := os.WriteFile(filepath.Join(dir, File), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("config %q: %v, want %q", content, err, want)
		}
		if _, err := Ensure(dir, "d"); err == nil {
			t.Fatalf("config %q was overwritten", content)
		}
	}
}
