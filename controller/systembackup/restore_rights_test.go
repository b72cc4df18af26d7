package systembackup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/rights"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/systembackup"
)

// TestARestoreMakesOnlyWhatItsRequesterMay: every object a restore
// would make needs its requester's right to make it (create on its kind
// where it is made) and to read what it reads (the volume a backing
// image exports, a target's credential Secret, a volume's backup
// volume), as the API asks of its callers. One right missing fails the
// whole restore before its first write, naming the object and the right;
// the manager's own account is not asked.
func TestARestoreMakesOnlyWhatItsRequesterMay(t *testing.T) {
	const ns = "ns"
	jane := authenticationv1.UserInfo{Username: "jane", Groups: []string{"dev"}}
	manager := authenticationv1.UserInfo{Username: rights.ServiceAccountUser(ns, "longhorn-service-account")}
	job := longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}, Spec: longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 1 * * *", Retain: 1, Concurrency: 1}}
	image := longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "golden"}, Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeDownload, SourceParameters: map[string]string{"url": "http://images/golden.raw"}}}
	exported := longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "exported"}, Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeExportFromVolume,
		SourceParameters: map[string]string{longhorn.DataSourceParameterVolumeName: "victim"}}}
	target := longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "offsite"}, Spec: longhorn.BackupTargetSpec{BackupTargetURL: "file:///offsite", CredentialSecret: "cred"}}
	volume := longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: longhorn.VolumeSpec{Size: 4 << 20, NumberOfReplicas: 1}, Status: longhorn.VolumeStatus{LastBackup: "backup-1"}}
	pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "driver.longhorn.io", VolumeHandle: "data"}},
		ClaimRef:               &corev1.ObjectReference{Namespace: "app", Name: "claim"}}}
	pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "app"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"}}
	// Every right the rows' archives need, as rights.Check.String says it.
	all := []string{
		"create recurringjobs.longhorn.io in ns", "create backingimages.longhorn.io in ns", `get volumes.longhorn.io "victim" in ns`,
		"create backuptargets.longhorn.io in ns", `get secrets "cred" in ns`, "create volumes.longhorn.io in ns",
		`get backupvolumes.longhorn.io "` + datastore.BackupVolumeObjectName("data", "default") + `" in ns`,
		"create persistentvolumes", "create persistentvolumeclaims in app",
	}
	but := func(missing string) []string {
		return slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == missing })
	}
	for _, tc := range []struct {
		name    string
		user    authenticationv1.UserInfo
		in      systembackup.Contents
		allowed []string
		// refused are fragments of the error; none: the restore is made.
		refused []string
	}{
		{"every right: all is made", jane, systembackup.Contents{RecurringJobs: []longhorn.RecurringJob{job}, BackingImages: []longhorn.BackingImage{image, exported},
			BackupTargets: []longhorn.BackupTarget{target}, Volumes: []longhorn.Volume{volume},
			PersistentVolumes: []corev1.PersistentVolume{pv}, PersistentVolumeClaims: []corev1.PersistentVolumeClaim{pvc}}, all, nil},
		{"no create on backing images: nothing is made, the job neither", jane,
			systembackup.Contents{RecurringJobs: []longhorn.RecurringJob{job}, BackingImages: []longhorn.BackingImage{image}},
			but("create backingimages.longhorn.io in ns"), []string{"BackingImage golden: jane may not create backingimages.longhorn.io in ns"}},
		{"a backing image exported from a volume its requester may not get", jane,
			systembackup.Contents{BackingImages: []longhorn.BackingImage{exported}},
			but(`get volumes.longhorn.io "victim" in ns`), []string{`BackingImage exported: jane may not get volumes.longhorn.io "victim" in ns`}},
		{"a target whose credential its requester may not get", jane,
			systembackup.Contents{BackupTargets: []longhorn.BackupTarget{target}},
			but(`get secrets "cred" in ns`), []string{`BackupTarget offsite: jane may not get secrets "cred" in ns`}},
		{"a volume restored from a backup volume its requester may not get", jane,
			systembackup.Contents{Volumes: []longhorn.Volume{volume}},
			but(`get backupvolumes.longhorn.io "` + datastore.BackupVolumeObjectName("data", "default") + `" in ns`), []string{`Volume data: jane may not get backupvolumes.longhorn.io`}},
		{"a claim in a namespace its requester may not create claims in", jane,
			systembackup.Contents{Volumes: []longhorn.Volume{volume}, PersistentVolumes: []corev1.PersistentVolume{pv}, PersistentVolumeClaims: []corev1.PersistentVolumeClaim{pvc}},
			but("create persistentvolumeclaims in app"), []string{"PersistentVolumeClaim app/claim: jane may not create persistentvolumeclaims in app"}},
		{"no cluster-wide create on PVs", jane,
			systembackup.Contents{Volumes: []longhorn.Volume{volume}, PersistentVolumes: []corev1.PersistentVolume{pv}},
			but("create persistentvolumes"), []string{"PersistentVolume pv-data: jane may not create persistentvolumes"}},
		{"each refusal is named", jane,
			systembackup.Contents{RecurringJobs: []longhorn.RecurringJob{job}, BackingImages: []longhorn.BackingImage{exported}},
			nil, []string{"RecurringJob nightly: jane may not create recurringjobs", "BackingImage exported: jane may not create backingimages", `get volumes.longhorn.io "victim"`}},
		{"the manager's own account is not asked", manager,
			systembackup.Contents{RecurringJobs: []longhorn.RecurringJob{job}, BackingImages: []longhorn.BackingImage{exported}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset()
			kube := kubefake.NewSimpleClientset()
			ds := datastore.New(ns, lh, kube, datastore.NewInformers(lh, kube, ns, 0))
			var asked []string
			c := &RestoreController{ds: ds, now: time.Now, self: manager.Username,
				review: func(_ context.Context, user authenticationv1.UserInfo, ch rights.Check) (bool, error) {
					if user.Username != tc.user.Username || !slices.Equal(user.Groups, tc.user.Groups) {
						t.Errorf("asked about %+v, want %+v", user, tc.user)
					}
					asked = append(asked, ch.String())
					return slices.Contains(tc.allowed, ch.String()), nil
				}}
			_, err := c.apply(context.Background(), tc.user, &tc.in, func(volume, backup string) string {
				return "file:///backups?backup=" + backup + "&volume=" + volume
			}, logrus.NewEntry(logrus.New()))
			writes := append(synctable.Writes(lh.Actions()), synctable.Writes(kube.Actions())...)
			if tc.user.Username == manager.Username && len(asked) > 0 {
				t.Errorf("the manager's own restore asked %v", asked)
			}
			if len(tc.refused) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(writes) == 0 {
					t.Fatal("nothing was made")
				}
				return
			}
			var pe *planError
			if !errors.As(err, &pe) {
				t.Fatalf("apply: %v, want the plan refused", err)
			}
			for _, f := range tc.refused {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("refusal %q does not say %q", err, f)
				}
			}
			if len(writes) > 0 {
				t.Errorf("a refused restore wrote %v", writes)
			}
		})
	}
}
