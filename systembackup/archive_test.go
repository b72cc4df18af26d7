package systembackup

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func sample() *Contents {
	return &Contents{
		Meta:          Meta{LonghornVersion: "v1.9.0", ManagerImage: "longhornio/longhorn-manager:v1.9.0"},
		Settings:      []longhorn.Setting{{ObjectMeta: metav1.ObjectMeta{Name: "backup-target"}, Value: "file:///b"}},
		Volumes:       []longhorn.Volume{{ObjectMeta: metav1.ObjectMeta{Name: "vol-1", Labels: map[string]string{"a": "b"}}, Spec: longhorn.VolumeSpec{Size: 4 << 20, NumberOfReplicas: 2}}},
		RecurringJobs: []longhorn.RecurringJob{{ObjectMeta: metav1.ObjectMeta{Name: "daily"}, Spec: longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeBackup, Cron: "0 0 * * *"}}},
		BackupTargets: []longhorn.BackupTarget{{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: longhorn.BackupTargetSpec{BackupTargetURL: "file:///b"}}},
		PersistentVolumes: []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: CSIDriver, VolumeHandle: "vol-1"}}}}},
		PersistentVolumeClaims: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}},
	}
}

// TestAnArchivedPersistentVolumeMustBeALonghornVolumesOwn: a PV of
// another driver, of no archived volume, or with a second source (a
// hostPath beside the CSI one) is refused; so is a claim of no archived
// PV.
func TestAnArchivedPersistentVolumeMustBeALonghornVolumesOwn(t *testing.T) {
	for name, change := range map[string]func(c *Contents){
		"another driver":       func(c *Contents) { c.PersistentVolumes[0].Spec.CSI.Driver = "evil.example.com" },
		"no archived volume":   func(c *Contents) { c.PersistentVolumes[0].Spec.CSI.VolumeHandle = "other" },
		"a hostPath beside":    func(c *Contents) { c.PersistentVolumes[0].Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/"} },
		"a claim of no PV":     func(c *Contents) { c.PersistentVolumeClaims[0].Spec.VolumeName = "pv-2" },
		"a claim's bad ns":     func(c *Contents) { c.PersistentVolumeClaims[0].Namespace = "Not/A/Namespace" },
		"no CSI source at all": func(c *Contents) { c.PersistentVolumes[0].Spec.CSI = nil },
	} {
		c := sample()
		change(c)
		data, err := Build("sb", c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse("sb", data); err == nil || !strings.Contains(err.Error(), "Persistent") {
			t.Errorf("%s: Parse = %v, want an error naming the PersistentVolume or claim", name, err)
		}
	}
}

func TestAnArchiveReadsBackWhatWasWritten(t *testing.T) {
	data, err := Build("sb-1", sample())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("sb-1", data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.LonghornVersion != "v1.9.0" || len(got.Settings) != 1 || got.Settings[0].Value != "file:///b" ||
		len(got.Volumes) != 1 || got.Volumes[0].Spec.Size != 4<<20 || got.Volumes[0].Labels["a"] != "b" ||
		len(got.RecurringJobs) != 1 || got.RecurringJobs[0].Spec.Cron != "0 0 * * *" ||
		len(got.BackupTargets) != 1 || len(got.PersistentVolumeClaims) != 1 || got.PersistentVolumeClaims[0].Spec.VolumeName != "pv-1" || len(got.PersistentVolumes) != 1 {
		t.Fatalf("read back %+v", got)
	}
	// Another name's archive is not this one's.
	if _, err := Parse("sb-2", data); err == nil || !strings.Contains(err.Error(), "not under sb-2/") {
		t.Fatalf("parse under another name: %v", err)
	}
}

type entry struct {
	name string
	data string
}

func zipOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		f, err := w.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAMalformedArchiveIsRefusedNamingWhatIsWrong(t *testing.T) {
	meta := entry{"sb/metadata.yaml", "longhornVersion: v1.9.0\n"}
	vols := func(body string) entry {
		return entry{"sb/yamls/longhorn/volumes.yaml", "apiVersion: longhorn.io/v1beta2\nkind: VolumeList\nitems:\n" + body}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"not a zip", []byte("hello"), "archive:"},
		{"no metadata", zipOf(t, vols("")), "no sb/metadata.yaml"},
		{"an entry out of its folder", zipOf(t, meta, entry{"sb/../etc/passwd", "x"}), "not under sb/"},
		{"an absolute entry", zipOf(t, meta, entry{"/sb/x", "x"}), "not under sb/"},
		{"a list of another kind", zipOf(t, meta, entry{"sb/yamls/longhorn/volumes.yaml", "kind: SettingList\nitems: []\n"}), `kind "SettingList", want "VolumeList"`},
		{"not YAML", zipOf(t, meta, vols("  - : [\n")), "volumes.yaml"},
		{"a volume with no size", zipOf(t, meta, vols("  - metadata: {name: v}\n    spec: {size: \"0\"}\n")), `Volume "v": spec.size`},
		{"a volume named badly", zipOf(t, meta, vols("  - metadata: {name: \"../x\"}\n    spec: {size: \"1024\"}\n")), "Volume: system backup name"},
		{"a volume twice", zipOf(t, meta, vols("  - metadata: {name: v}\n    spec: {size: \"1024\"}\n  - metadata: {name: v}\n    spec: {size: \"1024\"}\n")), `Volume "v": twice`},
		{"a file twice", zipOf(t, meta, vols(""), vols("")), "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("sb", tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, %v; want an error saying %q", c, err, tc.want)
			}
			if c != nil {
				t.Fatalf("a refused archive returned contents %+v", c)
			}
		})
	}
}

func TestAnArchiveTooLargeOnceInflatedIsRefused(t *testing.T) {
	big := strings.Repeat("a", maxEntrySize+1)
	data := zipOf(t, entry{"sb/metadata.yaml", big})
	if len(data) > 1<<20 {
		t.Fatalf("the test's archive is %d bytes; it should compress", len(data))
	}
	if _, err := Parse("sb", data); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("Parse = %v, want an error saying the entry is too large", err)
	}
}

func TestAnArchiveOfTooManyEntriesIsRefused(t *testing.T) {
	var es []entry
	for i := 0; i <= maxEntries; i++ {
		es = append(es, entry{"sb/x/" + strings.Repeat("a", i+1), ""})
	}
	if _, err := Parse("sb", zipOf(t, es...)); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Fatalf("Parse = %v, want an error about the entries", err)
	}
}

func FuzzParse(f *testing.F) {
	good, err := Build("sb", sample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("sb", data)
		if err == nil && c == nil {
			t.Fatal("no error and no contents")
		}
	})
}
