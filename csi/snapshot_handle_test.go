package csi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cadence-storage/longhorn-manager/client"
)

func TestSnapshotHandles(t *testing.T) {
	snap := func(kind, volume, name string) snapshotHandle {
		return snapshotHandle{kind: kind, volume: volume, name: name}
	}
	// Longhorn's bi handle, as its driver writes it.
	const bi = "bi://backing?backingImage=snapshot-1&backingImageDataSourceType=export-from-volume&export-type=raw&volume-name=pvc-1"
	for _, c := range []struct {
		name, id string
		want     snapshotHandle
		err      string
	}{
		{"a Longhorn snapshot", "snap://pvc-1/snapshot-2", snap(snapshotTypeSnap, "pvc-1", "snapshot-2"), ""},
		{"a backup", "bak://pvc-1/backup-0a1b", snap(snapshotTypeBak, "pvc-1", "backup-0a1b"), ""},
		{"Longhorn's older bs is bak", "bs://pvc-1/backup-0a1b", snap(snapshotTypeBak, "pvc-1", "backup-0a1b"), ""},
		{"a backing image", bi, snapshotHandle{kind: snapshotTypeBi, volume: "pvc-1", name: "snapshot-1", exportType: "raw"}, ""},
		{"a qcow2 backing image", strings.Replace(bi, "=raw", "=qcow2", 1), snapshotHandle{kind: snapshotTypeBi, volume: "pvc-1", name: "snapshot-1", exportType: "qcow2"}, ""},
		{"no kind", "pvc-1/snap", snapshotHandle{}, "is not snap://"},
		{"an unknown kind", "clone://pvc-1/x", snapshotHandle{}, `kind "clone"`},
		{"no name", "snap://pvc-1", snapshotHandle{}, "no /<name>"},
		{"an empty name", "snap://pvc-1/", snapshotHandle{}, "the name"},
		{"a name with a slash", "bak://pvc-1/a/b", snapshotHandle{}, "the name"},
		{"a path out of the volume", "bak://../backup-1", snapshotHandle{}, "the volume"},
		{"a query in the volume", "bak://v?action=x/b", snapshotHandle{}, "the volume"},
		{"a name too long", "snap://v/" + strings.Repeat("a", 254), snapshotHandle{}, "1 to 253"},
		{"bi without its query", "bi://pvc-1/snapshot-1", snapshotHandle{}, "is not bi://backing?"},
		{"bi without its image", "bi://backing?backingImageDataSourceType=export-from-volume&volume-name=pvc-1", snapshotHandle{}, "the backingImage"},
		{"bi without its volume", "bi://backing?backingImage=x&backingImageDataSourceType=export-from-volume", snapshotHandle{}, "the volume-name"},
		{"bi of another source", strings.Replace(bi, "export-from-volume", "download", 1), snapshotHandle{}, `backingImageDataSourceType "download"`},
		{"bi of another format", strings.Replace(bi, "=raw", "=vmdk", 1), snapshotHandle{}, `export-type "vmdk"`},
		{"bi with a key of its own", bi + "&url=http://x", snapshotHandle{}, "url is not a key"},
		{"bi with a key twice", bi + "&volume-name=pvc-2", snapshotHandle{}, "volume-name is given 2 times"},
		{"bi naming a path", strings.Replace(bi, "pvc-1", "..%2Fpvc-1", 1), snapshotHandle{}, "the volume-name"},
	} {
		got, err := parseSnapshotHandle(c.id)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %q: %v", c.name, c.id, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %q: error %v, want one saying %q", c.name, c.id, err, c.err)
		case got != c.want:
			t.Errorf("%s: %q gave %+v, want %+v", c.name, c.id, got, c.want)
		case c.err == "" && !strings.HasPrefix(c.id, "bs:") && got.String() != c.id:
			t.Errorf("%s: %q printed back as %q", c.name, c.id, got.String())
		}
	}
	// A handle without export-type is raw, and is printed with it.
	h, err := parseSnapshotHandle("bi://backing?backingImage=x&backingImageDataSourceType=export-from-volume&volume-name=v")
	if err != nil || h.exportType != "raw" || h.String() != "bi://backing?backingImage=x&backingImageDataSourceType=export-from-volume&export-type=raw&volume-name=v" {
		t.Errorf("a bi handle without export-type: %+v %q, %v", h, h.String(), err)
	}
}

func TestSnapshotClassParameters(t *testing.T) {
	for _, c := range []struct {
		name   string
		params map[string]string
		want   snapshotClass
		err    string
	}{
		{"none is a backup, Longhorn's default", nil, snapshotClass{kind: snapshotTypeBak, labels: map[string]string{"type": "bak"}}, ""},
		{"snap", map[string]string{"type": "snap"}, snapshotClass{kind: snapshotTypeSnap}, ""},
		{"bak", map[string]string{"type": "bak"}, snapshotClass{kind: snapshotTypeBak, labels: map[string]string{"type": "bak"}}, ""},
		{"bs, Longhorn's older name", map[string]string{"type": "bs"}, snapshotClass{kind: snapshotTypeBak, labels: map[string]string{"type": "bak"}}, ""},
		{"the sidecar's own are ignored", map[string]string{"type": "snap", "csi.storage.k8s.io/volumesnapshot/name": "x"}, snapshotClass{kind: snapshotTypeSnap}, ""},
		{"a full backup", map[string]string{"type": "bak", "backupMode": "full"}, snapshotClass{kind: snapshotTypeBak, backupMode: "full", labels: map[string]string{"type": "bak", "backupMode": "full"}}, ""},
		{"an incremental backup", map[string]string{"backupMode": "incremental"}, snapshotClass{kind: snapshotTypeBak, backupMode: "incremental", labels: map[string]string{"type": "bak", "backupMode": "incremental"}}, ""},
		{"a bak class's other parameters are labels", map[string]string{"type": "bak", "team": "db", "example.com/tier": "gold", "csi.storage.k8s.io/volumesnapshot/name": "x"},
			snapshotClass{kind: snapshotTypeBak, labels: map[string]string{"type": "bak", "team": "db", "example.com/tier": "gold"}}, ""},
		{"a backing image", map[string]string{"type": "bi"}, snapshotClass{kind: snapshotTypeBi, exportType: "raw"}, ""},
		{"a qcow2 backing image", map[string]string{"type": "bi", "exportType": "qcow2", "diskSelector": "", "nodeSelector": ""}, snapshotClass{kind: snapshotTypeBi, exportType: "qcow2"}, ""},
		{"export-type, Longhorn's other name", map[string]string{"type": "bi", "export-type": "qcow2"}, snapshotClass{kind: snapshotTypeBi, exportType: "qcow2"}, ""},
		{"both names, the same", map[string]string{"type": "bi", "export-type": "raw", "exportType": "raw"}, snapshotClass{kind: snapshotTypeBi, exportType: "raw"}, ""},
		{"an unknown type names the parameter", map[string]string{"type": "clone"}, snapshotClass{}, `parameters.type: "clone" is not snap`},
		{"a snap class takes nothing else", map[string]string{"type": "snap", "backupMode": "full"}, snapshotClass{}, "parameters.backupMode: not a parameter of driver.longhorn.io's VolumeSnapshotClass of type snap"},
		{"a bad backupMode", map[string]string{"type": "bak", "backupMode": "differential"}, snapshotClass{}, `parameters.backupMode: "differential" is not full`},
		{"a label key that is none", map[string]string{"type": "bak", "a b": "x"}, snapshotClass{}, "parameters.a b: a bak class's parameter other than type and backupMode is a label on its backups, and this is no label key"},
		{"an empty label value", map[string]string{"type": "bak", "team": ""}, snapshotClass{}, "parameters.team: a bak class's parameter other than type and backupMode is a label on its backups, and a label's value may not be empty"},
		{"a recurring job's label", map[string]string{"type": "bak", "RecurringJob": "daily"}, snapshotClass{}, "parameters.RecurringJob: a label the manager keeps for itself"},
		{"Longhorn's reserved label", map[string]string{"KubernetesStatus": "{}"}, snapshotClass{}, "parameters.KubernetesStatus: a label the manager keeps for itself"},
		{"a longhorn.io label", map[string]string{"longhorn.io/volume-uid": "x"}, snapshotClass{}, "parameters.longhorn.io/volume-uid: a label the manager keeps"},
		{"a *.longhorn.io label", map[string]string{"recurring-job.longhorn.io/daily": "enabled"}, snapshotClass{}, "parameters.recurring-job.longhorn.io/daily: a label the manager keeps"},
		{"a bad export type", map[string]string{"type": "bi", "exportType": "vmdk"}, snapshotClass{}, `parameters.exportType: "vmdk" is not raw or qcow2`},
		{"two export types", map[string]string{"type": "bi", "exportType": "raw", "export-type": "qcow2"}, snapshotClass{}, `parameters.exportType: "raw", but parameters.export-type is "qcow2"`},
		{"a disk selector", map[string]string{"type": "bi", "diskSelector": "ssd"}, snapshotClass{}, `parameters.diskSelector: only "" is honoured`},
		{"a node selector", map[string]string{"type": "bi", "nodeSelector": "storage"}, snapshotClass{}, `parameters.nodeSelector: only "" is honoured`},
		{"a bi class takes no labels", map[string]string{"type": "bi", "team": "db"}, snapshotClass{}, "parameters.team: not a parameter of driver.longhorn.io's VolumeSnapshotClass of type bi"},
	} {
		got, err := parseSnapshotClass(c.params)
		switch {
		case c.err == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s: %v gave %+v, %v; want %+v", c.name, c.params, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v gave error %v, want one saying %q", c.name, c.params, err, c.err)
		}
	}
}

func TestSnapshotNamesFromCSINames(t *testing.T) {
	for _, in := range []string{"snapshot-0b9e1f3c-6a1f-4a36-9d0f-0c2b1f1f2a11", "Sanity_Snap.1", strings.Repeat("s", 100)} {
		got := snapshotName(in)
		if len(got) > volumeNameMaxLength || strings.ContainsAny(got, "_.ABCDEFGHIJKLMNOPQRSTUVWXYZ") || snapshotName(in) != got {
			t.Errorf("snapshotName(%q) = %q: not a stable Snapshot object name", in, got)
		}
	}
	if got := snapshotName("snapshot-0b9e1f3c-6a1f-4a36-9d0f-0c2b1f1f2a11"); got != "snapshot-0b9e1f3c-6a1f-4a36-9d0f-0c2b1f1f2a11" {
		t.Errorf("the external-snapshotter's name became %q: it is kept as it is", got)
	}
}

func TestSnapshotDecisions(t *testing.T) {
	for _, c := range []struct {
		name string
		v    client.Volume
		want bool
	}{
		{"detached", client.Volume{State: "detached"}, true},
		{"detaching: not yet", client.Volume{State: "attached", CurrentNodeID: "n1"}, false},
		{"attaching: not yet", client.Volume{State: "attaching", NodeID: "n1"}, false},
		{"attached where asked", client.Volume{State: "attached", NodeID: "n1", CurrentNodeID: "n1"}, true},
		{"attached elsewhere than asked: moving", client.Volume{State: "attached", NodeID: "n2", CurrentNodeID: "n1"}, false},
		{"faulted", client.Volume{State: "faulted", NodeID: "n1"}, false},
	} {
		if got := settled(&c.v); got != c.want {
			t.Errorf("%s: settled(%+v) = %v, want %v", c.name, c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		snap client.SnapshotObject
		want bool
	}{
		{"a snapshot", client.SnapshotObject{Name: "s"}, true},
		{"a snap CSI snapshot", client.SnapshotObject{Name: "s", Labels: map[string]string{"type": "snap"}}, true},
		{"being deleted", client.SnapshotObject{Name: "s", MarkRemoved: true}, false},
		{"a bak CSI snapshot's base: listed as its backup", client.SnapshotObject{Name: "s", Labels: map[string]string{"type": "bak"}}, false},
	} {
		if got := listedSnapshot(&c.snap); got != c.want {
			t.Errorf("%s: listed %v, want %v", c.name, got, c.want)
		}
	}
	// The API takes attachedBy up to 253 characters of letters, digits
	// and . _ : / -.
	by := attacher(snapshotName(strings.Repeat("S", 128)))
	if len(by) > 253 || strings.Trim(by, "abcdefghijklmnopqrstuvwxyz0123456789-/") != "" {
		t.Errorf("attacher %q is no attachedBy the API takes", by)
	}
}

func TestBackingImageSnapshotDecisions(t *testing.T) {
	export := func(volume, exportType string) *client.BackingImage {
		p := map[string]string{"volume-name": volume}
		if exportType != "" {
			p["export-type"] = exportType
		}
		return &client.BackingImage{Name: "snapshot-1", SourceType: "export-from-volume", Parameters: p}
	}
	for _, c := range []struct {
		name string
		bi   *client.BackingImage
		want bool
	}{
		{"the raw export of the volume", export("pvc-1", "raw"), true},
		{"no export-type is raw", export("pvc-1", ""), true},
		{"another volume's", export("pvc-2", "raw"), false},
		{"another format", export("pvc-1", "qcow2"), false},
		{"a download of the name", &client.BackingImage{Name: "snapshot-1", SourceType: "download", Parameters: map[string]string{"url": "http://x", "volume-name": "pvc-1"}}, false},
	} {
		if got := exportedFrom(c.bi, "pvc-1", "raw"); got != c.want {
			t.Errorf("%s: exportedFrom %v, want %v", c.name, got, c.want)
		}
	}
	files := func(states ...string) *client.BackingImage {
		b := &client.BackingImage{DiskFileStatusMap: map[string]client.BackingImageFileState{}}
		for i, s := range states {
			b.DiskFileStatusMap[string(rune('a'+i))] = client.BackingImageFileState{State: s, Message: "why " + s}
		}
		return b
	}
	for _, c := range []struct {
		name          string
		bi            *client.BackingImage
		ready, failed bool
	}{
		{"no file yet", files(), false, false},
		{"in progress", files("in-progress"), false, false},
		{"ready", files("ready"), true, false},
		{"ready on one disk, failed on another", files("ready", "failed"), true, false},
		{"failed on one disk, pending on another", files("failed", "pending"), false, false},
		{"failed everywhere", files("failed", "failed"), false, true},
	} {
		if got := c.bi.ReadyFile(); got != c.ready {
			t.Errorf("%s: ReadyFile %v, want %v", c.name, got, c.ready)
		}
		if got := failedExport(c.bi); (got != "") != c.failed || c.failed && !strings.Contains(got, "why failed") {
			t.Errorf("%s: failedExport %q, want failed %v", c.name, got, c.failed)
		}
	}
}
