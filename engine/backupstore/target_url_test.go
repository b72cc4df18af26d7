package backupstore

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTargetLocation: the spellings of one place are one location, and
// two places are two.
func TestTargetLocation(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(root, "backups")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"localhost is this host", "file://localhost/x", "file:///x", true},
		{"any host is this host, as the file driver reads none", "file://nfs-server/x", "file:///x", true},
		{"a trailing slash", "file:///x/", "file:///x", true},
		{". and ..", "file:///y/./../x", "file:///x", true},
		{"doubled slashes", "file:///a//x", "file:///a/x", true},
		{"a backup URL's query", "file:///x?backup=b-1&volume=vol", "file:///x", true},
		{"a percent-encoded name", "file:///a%20b", "file:///a b", true},
		{"a link to the folder", "file://" + link, "file://" + real, true},
		{"a folder below a link, not yet made", "file://" + link + "/sub", "file://" + real + "/sub", true},
		{"two folders", "file:///x", "file:///y", false},
		{"a folder and one inside it", "file:///x", "file:///x/y", false},
		{"letter case is kept in a path", "file:///X", "file:///x", false},
		{"s3: the region is not part of the place", "s3://bkt@us-east-1/p", "s3://bkt@eu-west-1/p", true},
		{"s3: a trailing slash", "s3://bkt@us-east-1/p/", "s3://bkt@us-east-1/p", true},
		{"s3: no prefix, written two ways", "s3://bkt@us-east-1/", "s3://bkt@us-east-1", true},
		{"s3: a cleaned prefix", "s3://bkt@us-east-1/a/./b//", "s3://bkt@us-east-1/a/b", true},
		{"s3: a bucket name's case", "s3://BKT@us-east-1/p", "s3://bkt@us-east-1/p", true},
		{"s3: two prefixes", "s3://bkt@us-east-1/p", "s3://bkt@us-east-1/q", false},
		{"s3: two buckets", "s3://a@us-east-1/p", "s3://b@us-east-1/p", false},
		{"s3 and file", "s3://x@us-east-1/", "file:///x", false},
		{"no URL is no place", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameTarget(tc.a, tc.b); got != tc.same {
				la, _ := TargetLocation(tc.a)
				lb, _ := TargetLocation(tc.b)
				t.Errorf("SameTarget(%q, %q) = %v, want %v (locations %q and %q)", tc.a, tc.b, got, tc.same, la, lb)
			}
		})
	}
	for _, bad := range []string{"file:relative", "file:", "s3://us-east-1/p", "%zz"} {
		if loc, err := TargetLocation(bad); err == nil {
			t.Errorf("TargetLocation(%q) = %q, want an error", bad, loc)
		}
	}
}
