package systembackup

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/controller/backupverify"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/types"
)

// volumesDataStore is a datastore over fake clientsets whose cache holds
// volumes.
func volumesDataStore(t *testing.T, volumes ...*longhorn.Volume) *datastore.DataStore {
	t.Helper()
	lh := lhfake.NewSimpleClientset()
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	for _, v := range volumes {
		if err := inf.Longhorn.Longhorn().V1beta2().Volumes().Informer().GetIndexer().Add(v); err != nil {
			t.Fatal(err)
		}
	}
	return datastore.New("ns", lh, kube, inf)
}

func namedVolume(name string, labels map[string]string, owners ...metav1.OwnerReference) *longhorn.Volume {
	return &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, OwnerReferences: owners},
		Spec: longhorn.VolumeSpec{Size: 4 << 20}}
}

// TestADrillsScratchVolumeIsNotArchived: a full drill's scratch volume
// (its label and its Backup owner) is left out of the archive; a volume
// of the user's with the label alone is archived.
func TestADrillsScratchVolumeIsNotArchived(t *testing.T) {
	scratch := namedVolume(backupverify.ScratchVolumeName("backup-1"), map[string]string{types.LabelBackupVerifyScratch: "backup-1"},
		metav1.OwnerReference{APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "Backup", Name: "backup-1", UID: "b-uid"})
	c := &BackupController{ds: volumesDataStore(t, scratch, namedVolume("data", nil), namedVolume("labelled", map[string]string{types.LabelBackupVerifyScratch: "x"}))}
	contents, err := c.collect(context.Background(), map[string]volumeBackup{"data": {name: "backup-2"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range contents.Volumes {
		names = append(names, v.Name)
	}
	if want := []string{"data", "labelled"}; !slices.Equal(names, want) {
		t.Fatalf("archived volumes %v, want %v", names, want)
	}
}

// TestARestoreDoesNotMakeADrillsScratchVolume: an archive made before
// scratch volumes were left out may hold one (its label and the name the
// drill gives it); a restore does not make it again, as it would be
// owned by no Backup and never swept. A volume with the label under
// another name is the user's, and is restored.
func TestARestoreDoesNotMakeADrillsScratchVolume(t *testing.T) {
	archived := func(name string, labels map[string]string) longhorn.Volume {
		v := *namedVolume(name, labels)
		v.Namespace = ""
		v.Status.LastBackup = "backup-9"
		return v
	}
	scratchName := backupverify.ScratchVolumeName("backup-1")
	in := &systembackup.Contents{Volumes: []longhorn.Volume{
		archived(scratchName, map[string]string{types.LabelBackupVerifyScratch: "backup-1"}),
		archived("data", nil),
		archived("labelled", map[string]string{types.LabelBackupVerifyScratch: "x"}),
	}}
	c := &RestoreController{ds: volumesDataStore(t)}
	p, err := c.plan(context.Background(), in, func(volume, backup string) string { return "file:///b?backup=" + backup + "&volume=" + volume })
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, v := range p.volumes {
		made = append(made, v.Name)
	}
	if want := []string{"data", "labelled"}; !slices.Equal(made, want) {
		t.Errorf("the restore makes volumes %v, want %v", made, want)
	}
	if !slices.Equal(p.scratch, []string{scratchName}) {
		t.Errorf("scratch volumes left out %v, want [%s]", p.scratch, scratchName)
	}
}
