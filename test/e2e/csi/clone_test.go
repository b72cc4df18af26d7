//go:build e2e

package csi

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/cadence-storage/longhorn-manager/internal/testtime"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func snapshotContent(id string) *csipb.VolumeContentSource {
	return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
}

func volumeContent(id string) *csipb.VolumeContentSource {
	return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: id}}}
}

// TestCSICreateVolumeFromAContentSource: CreateVolume with a
// volume_content_source makes a volume that holds its source's bytes when
// the call returns: a Longhorn snapshot's handle (snap://) and a volume
// are cloned, a backup's handle (bak://) is restored; the answer echoes
// the source. A retry with the same name answers the volume, another
// source is AlreadyExists; a source that does not exist is NotFound, a
// malformed one InvalidArgument naming volume_content_source, one larger
// than the volume OutOfRange, and none of those makes a volume.
func TestCSICreateVolumeFromAContentSource(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	cs := csiController(t, e)
	ctx := context.Background()
	const size = 16 << 20
	e.SetBackupTarget(t, "file://"+t.TempDir())
	e.Call(t, "POST", "/v1/volumes", `{"name":"vola","size":"16Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/vola?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	endpoint := e.WaitVolume(t, "vola", "vola attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0x42 0 2M", "write -P 0x24 12M 1M", "flush")
	atSnapshot := make([]byte, size)
	framework.Fill(atSnapshot, 0x42, 0, 2<<20)
	framework.Fill(atSnapshot, 0x24, 12<<20, 1<<20)
	e.Call(t, "POST", "/v1/volumes/vola?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	backup := e.Call(t, "POST", "/v1/volumes/vola?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	e.CompletedBackupURL(t, backup)
	framework.QemuIO(t, endpoint, "write -P 0x99 1M 2M", "flush")
	now := bytes.Clone(atSnapshot)
	framework.Fill(now, 0x99, 1<<20, 2<<20)
	e.WaitSnapshotReady(t, "s1")

	for _, c := range []struct {
		name   string
		source *csipb.VolumeContentSource
		want   []byte
	}{
		{"pvc-from-snap", snapshotContent("snap://vola/s1"), atSnapshot},
		{"pvc-from-vol", volumeContent("vola"), now},
		{"pvc-from-bak", snapshotContent("bak://vola/" + backup), atSnapshot},
	} {
		req := createRequest(c.name, size, map[string]string{"numberOfReplicas": "1"})
		req.VolumeContentSource = c.source
		resp, err := cs.CreateVolume(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !proto.Equal(resp.GetVolume().GetContentSource(), c.source) || resp.GetVolume().GetCapacityBytes() != size {
			t.Errorf("%s: answered %v", c.name, resp)
		}
		// Made again by its name: the same volume.
		if again, err := cs.CreateVolume(ctx, req); err != nil || again.GetVolume().GetVolumeId() != c.name || !proto.Equal(again.GetVolume().GetContentSource(), c.source) {
			t.Errorf("%s made again: %v, %v", c.name, again, err)
		}
		if got := e.AttachedContent(t, c.name); !bytes.Equal(got, c.want) {
			t.Errorf("%s does not hold its source's bytes", c.name)
		}
	}
	// No capacity asked: the source's.
	req := createRequest("pvc-any-size", 0, map[string]string{"numberOfReplicas": "1"})
	req.VolumeContentSource = volumeContent("vola")
	if resp, err := cs.CreateVolume(ctx, req); err != nil || resp.GetVolume().GetCapacityBytes() != size {
		t.Errorf("a clone with no capacity asked: %v, %v", resp, err)
	}

	before := e.VolumeNames(t)
	for _, c := range []struct {
		what   string
		source *csipb.VolumeContentSource
		size   int64
		params map[string]string
		code   codes.Code
		names  string
	}{
		{"another source for an existing name", volumeContent("vola"), size, nil, codes.AlreadyExists, "made from dataSource snap://vola/s1, not from volume vola"},
		{"no such snapshot", snapshotContent("snap://vola/nope"), size, nil, codes.NotFound, "volume vola has no snapshot nope"},
		{"no such volume's snapshot", snapshotContent("snap://nope/s1"), size, nil, codes.NotFound, "source volume nope does not exist"},
		{"no such volume", volumeContent("nope"), size, nil, codes.NotFound, "source volume nope does not exist"},
		{"no such backup", snapshotContent("bak://vola/backup-nope"), size, nil, codes.NotFound, "no backup target has backup backup-nope of volume vola"},
		{"an ID that is no handle", snapshotContent("vola/s1"), size, nil, codes.NotFound, `no snapshot has ID "vola/s1"`},
		{"a handle of another kind", snapshotContent("bi://vola/s1"), size, nil, codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id"},
		{"a malformed snap handle", snapshotContent("snap://vola"), size, nil, codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id"},
		{"a malformed bak handle", snapshotContent("bak://vola"), size, nil, codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id"},
		{"an empty volume id", volumeContent(""), size, nil, codes.InvalidArgument, "volume_content_source.volume.volume_id"},
		{"smaller than the source", volumeContent("vola"), 8 << 20, nil, codes.OutOfRange, "volume_content_source: volume vola holds 16777216 bytes, more than the 10485760"},
		{"smaller than the backup", snapshotContent("bak://vola/" + backup), 8 << 20, nil, codes.OutOfRange, "capacity_range"},
		{"beside fromBackup", volumeContent("vola"), size, map[string]string{"fromBackup": "file:///x?backup=b&volume=vola"}, codes.InvalidArgument, "volume_content_source: a volume is made from its content source"},
	} {
		name := "pvc-refused"
		if c.code == codes.AlreadyExists {
			name = "pvc-from-snap"
		}
		req := createRequest(name, c.size, c.params)
		req.VolumeContentSource = c.source
		wantCode(t, c.what, c.code, c.names, func() error { _, err := cs.CreateVolume(ctx, req); return err })
	}
	if after := e.VolumeNames(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused requests changed the volumes: %v, then %v", before, after)
	}
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got, now) {
		t.Error("the copies changed their source")
	}

	// A detached source, as a PVC's usually is: its snapshot is cloned.
	e.Call(t, "POST", "/v1/volumes/vola?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vola", "vola detached", func(v map[string]any) bool { return v["state"] == "detached" })
	req = createRequest("pvc-from-detached", size, map[string]string{"numberOfReplicas": "1"})
	req.VolumeContentSource = snapshotContent("snap://vola/s1")
	if _, err := cs.CreateVolume(ctx, req); err != nil {
		t.Fatalf("a clone of a detached volume's snapshot: %v", err)
	}
	if got := e.AttachedContent(t, "pvc-from-detached"); !bytes.Equal(got, atSnapshot) {
		t.Error("the clone of a detached volume's snapshot does not hold its bytes")
	}
}

// TestCSICreateVolumeWaitsUntilTheVolumeHoldsItsSource: a CreateVolume
// whose volume cannot be filled yet (its backup's blocks are damaged in
// the target, so the restore fails and is tried again) answers Aborted,
// the spec's "operation pending", before its deadline, saying why or how
// far; the
// volume stays, not attachable, for the provisioner's next call. Once
// the target holds the right blocks again, the next call answers the
// volume, which reads the backup's bytes.
func TestCSICreateVolumeWaitsUntilTheVolumeHoldsItsSource(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	cs := csiController(t, e)
	target := t.TempDir()
	e.SetBackupTarget(t, "file://"+target)
	e.Call(t, "POST", "/v1/volumes", `{"name":"volb","size":"16Mi","numberOfReplicas":1}`).Expect(t, 200)
	endpoint := e.AttachedContentEndpoint(t, "volb")
	framework.QemuIO(t, endpoint, "write -P 0x3e 0 3M", "flush")
	e.Call(t, "POST", "/v1/volumes/volb?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	backup := e.Call(t, "POST", "/v1/volumes/volb?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	e.CompletedBackupURL(t, backup)

	// Damage every block, keeping the originals to put back.
	saved := map[string][]byte{}
	err := filepath.WalkDir(target, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".blk") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		saved[path] = data
		return os.WriteFile(path, bytes.Repeat([]byte{0xee}, len(data)), 0o644)
	})
	if err != nil || len(saved) == 0 {
		t.Fatalf("the backup's blocks: %d, %v", len(saved), err)
	}

	req := createRequest("pvc-restoring", 16<<20, map[string]string{"numberOfReplicas": "1"})
	req.VolumeContentSource = snapshotContent("bak://volb/" + backup)
	call := func() (*csipb.CreateVolumeResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testtime.Scale(8*time.Second))
		defer cancel()
		return cs.CreateVolume(ctx, req)
	}
	// Failed, or being tried again (the message then says how far).
	wantCode(t, "a restore that fails", codes.Aborted, "restored from file://", func() error { _, err := call(); return err })
	v := e.Call(t, "GET", "/v1/volumes/pvc-restoring", "").Expect(t, 200).Body
	if v["state"] == "attached" {
		t.Fatalf("a volume whose restore failed is attached: %v", v)
	}

	for path, data := range saved {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The manager tries a failed restore again with a backoff that grows
	// to minutes; a change of the volume (as a user's, once the target is
	// mended) brings it back at once.
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Patch(context.Background(), "pvc-restoring", k8stypes.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"test/target-mended":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var resp *csipb.CreateVolumeResponse
	framework.Eventually(t, 2*time.Minute, "CreateVolume answers the restored volume", func() (bool, error) {
		resp, err = call()
		return err == nil, nil
	})
	if !proto.Equal(resp.GetVolume().GetContentSource(), req.VolumeContentSource) {
		t.Errorf("answered %v", resp)
	}
	want := make([]byte, 16<<20)
	framework.Fill(want, 0x3e, 0, 3<<20)
	if got := e.AttachedContent(t, "pvc-restoring"); !bytes.Equal(got, want) {
		t.Error("the restored volume does not hold the backup's bytes")
	}
}
