//go:build e2e

package csi

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCSINodeStagesACloneAsItIs: a clone of a volume that holds an ext4
// filesystem holds that filesystem: the Node service mounts it as it is
// (it formats only a device that holds nothing), and the file written
// into the source before the clone is there.
func TestCSINodeStagesACloneAsItIs(t *testing.T) {
	e := newCSINodeEnv(t)
	staging, copyStaging := e.path("staging"), e.path("copy-staging")
	e.attachedVolume(t, "origin", "64Mi")
	e.stage(t, "origin", staging, mountCap("ext4"))
	if err := os.WriteFile(filepath.Join(staging, "hello.txt"), []byte("written before the clone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Unstaged, the filesystem is clean and its writes are in the volume.
	e.unstage(t, "origin", staging)

	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"64Mi","numberOfReplicas":1,"dataSource":"vol://origin"}`).Expect(t, 200)
	e.WaitCloned(t, "copy")
	e.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "copy", "copy attached with an endpoint", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	e.stage(t, "copy", copyStaging, mountCap("ext4"))
	if data, err := os.ReadFile(filepath.Join(copyStaging, "hello.txt")); err != nil || string(data) != "written before the clone\n" {
		t.Errorf("the clone's filesystem: hello.txt %q, %v", data, err)
	}
	e.unstage(t, "copy", copyStaging)
	e.assertNothingLeft(t)
}
