package backingimage

import (
	"os"
	"strings"
	"testing"
)

func TestValidateFileNamesTheFieldAndTheRule(t *testing.T) {
	sum := strings.Repeat("0", 128)
	if err := ValidateFile("ubuntu-22.04", "6f2c-91ab", sum); err != nil {
		t.Fatalf("a valid file: %v", err)
	}
	for _, c := range []struct{ name, uuid, sum, want string }{
		{"", "u", "", `name ""`},
		{"../x", "u", "", `name "../x"`},
		{"Upper", "u", "", `name "Upper"`},
		{"a", "", "", `uuid ""`},
		{"a", "u/1", "", `uuid "u/1"`},
		{"a", "u", "ABC", `checksum "ABC"`},
		{strings.Repeat("a", 200), strings.Repeat("b", 60), "", "at most 255 fit a file system"},
	} {
		err := ValidateFile(c.name, c.uuid, c.sum)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateFile(%q, %q, %q) = %v, want an error saying %q", c.name, c.uuid, c.sum, err, c.want)
		}
	}
}

func TestPartFileCommitsOnlyAVerifiedFile(t *testing.T) {
	dir := t.TempDir()
	final := dir + "/f/backing"
	data := make([]byte, 3*holeBlock+100)
	for i := range holeBlock {
		data[i] = byte(i)
	}
	data[len(data)-1] = 7 // zeros in the middle become a hole

	write := func() *PartFile {
		p, err := CreatePart(final)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 1000 {
			p.Write(data[off:min(off+1000, len(data))])
		}
		return p
	}
	if _, err := write().Commit(int64(len(data))+1, ""); err == nil || !strings.Contains(err.Error(), "size mismatch") {
		t.Fatalf("commit with a wrong size: %v", err)
	}
	if _, err := write().Commit(-1, strings.Repeat("0", 128)); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("commit with a wrong checksum: %v", err)
	}
	if entries := listDir(t, dir+"/f"); len(entries) != 0 {
		t.Fatalf("failed commits left %v", entries)
	}
	p := write()
	want := p.Checksum()
	sum, err := write().Commit(int64(len(data)), want)
	p.Abort()
	if err != nil || sum != want {
		t.Fatalf("commit: %s, %v", sum, err)
	}
	got, size, err := HashFile(t.Context(), final, nil)
	if err != nil || got != want || size != int64(len(data)) {
		t.Fatalf("the committed file hashes to %s (%d bytes), %v", got, size, err)
	}
	if entries := listDir(t, dir+"/f"); len(entries) != 1 {
		t.Fatalf("the folder holds %v, want the file alone", entries)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
