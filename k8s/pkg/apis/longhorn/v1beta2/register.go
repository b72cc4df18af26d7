package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn"
)

// SchemeGroupVersion is the group and version of these types.
var SchemeGroupVersion = schema.GroupVersion{Group: longhorn.GroupName, Version: "v1beta2"}

// Resource returns a GroupResource of this group for an unqualified resource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Setting{}, &SettingList{},
		&Node{}, &NodeList{},
		&Volume{}, &VolumeList{},
		&Engine{}, &EngineList{},
		&Replica{}, &ReplicaList{},
		&Snapshot{}, &SnapshotList{},
		&Backup{}, &BackupList{},
		&BackupVolume{}, &BackupVolumeList{},
		&BackupTarget{}, &BackupTargetList{},
		&RecurringJob{}, &RecurringJobList{},
		&BackingImage{}, &BackingImageList{},
		&BackingImageDataSource{}, &BackingImageDataSourceList{},
		&BackingImageManager{}, &BackingImageManagerList{},
		&InstanceManager{}, &InstanceManagerList{},
		&SystemBackup{}, &SystemBackupList{},
		&SystemRestore{}, &SystemRestoreList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
