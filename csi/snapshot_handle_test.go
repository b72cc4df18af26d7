package csi

import (
	"strings"
	"testing"

	"github.com/cadence-storage/longhorn-manager/client"
)

func TestSnapshotHandles(t *testing.T) {
	for _, c := range []struct {
		name, id string
		want     snapshotHandle
		err      string
	}{
		{"a Longhorn snapshot", "snap://pvc-1/snapshot-2", snapshotHandle{snapshotTypeSnap, "pvc-1", "snapshot-2"}, ""},
		{"a backup", "bak://pvc-1/backup-0a1b", snapshotHandle{snapshotTypeBak, "pvc-1", "backup-0a1b"}, ""},
		{"Longhorn's older bs is bak", "bs://pvc-1/backup-0a1b", snapshotHandle{snapshotTypeBak, "pvc-1", "backup-0a1b"}, ""},
		{"no kind", "pvc-1/snap", snapshotHandle{}, "is not snap://"},
		{"an unknown kind", "bi://backing?name=x", snapshotHandle{}, `kind "bi"`},
		{"no name", "snap://pvc-1", snapshotHandle{}, "no /<name>"},
		{"an empty name", "snap://pvc-1/", snapshotHandle{}, "the name"},
		{"a name with a slash", "bak://pvc-1/a/b", snapshotHandle{}, "the name"},
		{"a path out of the volume", "bak://../backup-1", snapshotHandle{}, "the volume"},
		{"a query in the volume", "bak://v?action=x/b", snapshotHandle{}, "the volume"},
		{"a name too long", "snap://v/" + strings.Repeat("a", 254), snapshotHandle{}, "1 to 253"},
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
}

func TestSnapshotTypeParameter(t *testing.T) {
	for _, c := range []struct {
		name   string
		params map[string]string
		want   string
		err    string
	}{
		{"none is a backup, Longhorn's default", nil, snapshotTypeBak, ""},
		{"snap", map[string]string{"type": "snap"}, snapshotTypeSnap, ""},
		{"bak", map[string]string{"type": "bak"}, snapshotTypeBak, ""},
		{"bs, Longhorn's older name", map[string]string{"type": "bs"}, snapshotTypeBak, ""},
		{"the sidecar's own are ignored", map[string]string{"type": "snap", "csi.storage.k8s.io/volumesnapshot/name": "x"}, snapshotTypeSnap, ""},
		{"an unknown type names the parameter", map[string]string{"type": "clone"}, "", `parameters.type: "clone" is not snap`},
		{"a backing image is not made", map[string]string{"type": "bi"}, "", `parameters.type: "bi"`},
		{"an unknown parameter is named", map[string]string{"export-type": "qcow2"}, "", "parameters.export-type"},
	} {
		got, err := snapshotType(c.params)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %v gave %q, %v; want %q", c.name, c.params, got, err, c.want)
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
