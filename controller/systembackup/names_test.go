package systembackup

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/systembackup"
)

func TestSourceURLIsLonghorns(t *testing.T) {
	for target, want := range map[string]string{
		"file:///backups":              "file:///backups/backupstore/system-backups/v1.9.0/sb",
		"s3://backups@us-east-1/":      "s3://backups@us-east-1/backupstore/system-backups/v1.9.0/sb",
		"s3://backups@us-east-1/there": "s3://backups@us-east-1/there/backupstore/system-backups/v1.9.0/sb",
	} {
		if got := sourceURL(target, "v1.9.0", "sb"); got != want {
			t.Errorf("sourceURL(%q) = %q, want %q", target, got, want)
		}
	}
}

func TestThePVBindersAnnotationsAreLeftOut(t *testing.T) {
	m := withoutBinding(metav1.ObjectMeta{Name: "pvc", Annotations: map[string]string{
		"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes", "team": "storage"}})
	if len(m.Annotations) != 1 || m.Annotations["team"] != "storage" {
		t.Errorf("annotations %v, want the user's alone", m.Annotations)
	}
}

func TestTheArchivesDriverIsTheCSIDrivers(t *testing.T) {
	if systembackup.CSIDriver != csi.DriverName {
		t.Fatalf("systembackup.CSIDriver %q is not csi.DriverName %q", systembackup.CSIDriver, csi.DriverName)
	}
}
