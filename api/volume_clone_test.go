package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A volume create with a dataSource (Longhorn's clone) is checked before
// anything is made: the field and the rule are named, a source that does
// not exist is 404, and a refused request makes no volume.
func TestCreateVolumeChecksItsDataSource(t *testing.T) {
	snap := func(name, volume string, ready bool) *longhorn.Snapshot {
		return &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
			Spec: longhorn.SnapshotSpec{Volume: volume}, Status: longhorn.SnapshotStatus{ReadyToUse: ready}}
	}
	s := newTestServer(t,
		&longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "src", Namespace: testNamespace}, Spec: longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 1}},
		snap("snap-1", "src", true), snap("other", "x", true), snap("pending", "src", false))
	eventually(t, "the source in the cache", func() bool { _, err := s.server.ds.GetVolumeRO("src"); return err == nil })
	for _, c := range []struct {
		name, body string
		code       int
		message    string
	}{
		{"malformed", `"size":"1Gi","dataSource":"src"`, http.StatusBadRequest, `dataSource: "src": must be vol://<volume> or snap://<volume>/<snapshot>`},
		{"a backup's handle", `"size":"1Gi","dataSource":"bak://src/backup-1"`, http.StatusBadRequest, "dataSource: "},
		{"no such volume", `"size":"1Gi","dataSource":"vol://missing"`, http.StatusNotFound, `source volume "missing" does not exist`},
		{"no such snapshot", `"size":"1Gi","dataSource":"snap://src/none"`, http.StatusNotFound, `volume "src" has no snapshot "none"`},
		{"another volume's snapshot", `"size":"1Gi","dataSource":"snap://src/other"`, http.StatusNotFound, `volume "src" has no snapshot "other"`},
		{"a snapshot not ready", `"size":"1Gi","dataSource":"snap://src/pending"`, http.StatusBadRequest, "is not ready to use yet"},
		{"smaller than the source", `"size":"512Mi","dataSource":"vol://src"`, http.StatusBadRequest, "size: 536870912 bytes is less than the 1073741824 bytes of source volume"},
		{"with fromBackup", `"size":"1Gi","dataSource":"vol://src","fromBackup":"file:///b?backup=backup-1&volume=src"`, http.StatusBadRequest, "dataSource: a volume is made from a backup (fromBackup) or from another volume (dataSource), not both"},
		{"with a backing image", `"size":"1Gi","dataSource":"vol://src","backingImage":"img"`, http.StatusBadRequest, "dataSource: a clone holds its source's bytes"},
	} {
		code, out, raw := s.do(t, "POST", "/v1/volumes", `{"name":"clone","numberOfReplicas":1,`+c.body+`}`)
		if code != c.code || !strings.Contains(out["message"].(string), c.message) {
			t.Errorf("%s: %d %s", c.name, code, raw)
		}
	}
	if _, err := s.lh.LonghornV1beta2().Volumes(testNamespace).Get(context.Background(), "clone", metav1.GetOptions{}); err == nil {
		t.Fatal("a volume was created for a refused clone")
	}
	for name, body := range map[string]string{
		"of-volume":   `"size":"1Gi","dataSource":"vol://src"`,
		"of-snapshot": `"size":"2Gi","dataSource":"snap://src/snap-1"`,
	} {
		code, out, raw := s.do(t, "POST", "/v1/volumes", `{"name":"`+name+`","numberOfReplicas":1,`+body+`}`)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", name, code, raw)
		}
		v, err := s.lh.LonghornV1beta2().Volumes(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || v.Spec.DataSource != out["dataSource"] || v.Spec.DataSource == "" {
			t.Errorf("%s: the volume's dataSource %v (%v), the API's %v", name, v, err, out["dataSource"])
		}
	}
}

// A volume is not ready for workloads while it is restored or cloned,
// as Longhorn's API says.
func TestAVolumeIsNotReadyUntilItHoldsItsSource(t *testing.T) {
	vol := func(spec longhorn.VolumeSpec, st longhorn.VolumeStatus) *longhorn.Volume {
		st.State = longhorn.VolumeStateDetached
		return &longhorn.Volume{Spec: spec, Status: st}
	}
	for _, c := range []struct {
		name  string
		v     *longhorn.Volume
		ready bool
		why   string
	}{
		{"plain", vol(longhorn.VolumeSpec{}, longhorn.VolumeStatus{}), true, ""},
		{"being restored", vol(longhorn.VolumeSpec{FromBackup: "s3://b@r/?backup=x&volume=v"}, longhorn.VolumeStatus{RestoreRequired: true}), false, "being restored from s3://"},
		{"being cloned", vol(longhorn.VolumeSpec{DataSource: "vol://src"}, longhorn.VolumeStatus{CloneStatus: longhorn.VolumeCloneStatus{State: "initiated"}}), false, "being cloned from vol://src"},
		{"not cloned yet", vol(longhorn.VolumeSpec{DataSource: "vol://src"}, longhorn.VolumeStatus{}), false, "being cloned from vol://src"},
		{"clone failed", vol(longhorn.VolumeSpec{DataSource: "snap://src/s"}, longhorn.VolumeStatus{CloneStatus: longhorn.VolumeCloneStatus{State: "failed"}}), false, "the clone from snap://src/s failed"},
		{"cloned", vol(longhorn.VolumeSpec{DataSource: "vol://src"}, longhorn.VolumeStatus{CloneStatus: longhorn.VolumeCloneStatus{State: "completed"}}), true, ""},
	} {
		ready, why := volumeReady(c.v)
		if ready != c.ready || !strings.Contains(why, c.why) || (c.ready && why != "") {
			t.Errorf("%s: ready %v %q, want %v %q", c.name, ready, why, c.ready, c.why)
		}
	}
}
