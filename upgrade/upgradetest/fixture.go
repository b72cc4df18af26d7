// Package upgradetest builds the state a Longhorn v1.1 cluster leaves
// behind (volumes with spec.recurringJobs, a StorageClass and the default
// StorageClass ConfigMap with the recurringJobs parameter, per-volume
// CronJobs) and checks that a migration turned it into exactly the v1.2
// state. Tests of the upgrade package and of the daemon share it.
package upgradetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/v110to120"
)

// The old jobs of the fixture. snapHourly appears on two volumes under two
// names: it must become one RecurringJob.
var (
	snapHourly  = longhorn.VolumeRecurringJobSpec{Name: "snap", Task: "snapshot", Cron: "0 * * * *", Retain: 3}
	snapHourly2 = longhorn.VolumeRecurringJobSpec{Name: "snap2", Task: "snapshot", Cron: "0 * * * *", Retain: 3}
	backupDaily = longhorn.VolumeRecurringJobSpec{Name: "bak", Task: "backup", Cron: "@daily", Retain: 7, Labels: map[string]string{"tier": "gold"}}
	classJob    = longhorn.VolumeRecurringJobSpec{Name: "sc-snap", Task: "snapshot", Cron: "*/30 * * * *", Retain: 2}
	defaultJob  = longhorn.VolumeRecurringJobSpec{Name: "weekly", Task: "backup", Cron: "0 3 * * 0", Retain: 4}
)

// Fixture is the old state in one namespace, with a StorageClass of its own.
type Fixture struct {
	Namespace    string
	StorageClass string
	kube         kubernetes.Interface
	lh           lhclientset.Interface
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Reconnect points the fixture's checks at new clients: a restarted
// control plane serves on another address.
func (f *Fixture) Reconnect(kube kubernetes.Interface, lh lhclientset.Interface) {
	f.kube, f.lh = kube, lh
}

// Create writes the old state.
func Create(t testing.TB, kube kubernetes.Interface, lh lhclientset.Interface, namespace string) *Fixture {
	t.Helper()
	ctx := context.Background()
	f := &Fixture{Namespace: namespace, StorageClass: "longhorn-" + namespace, kube: kube, lh: lh}
	volume := func(name string, jobs ...longhorn.VolumeRecurringJobSpec) {
		_, err := lh.LonghornV1beta2().Volumes(namespace).Create(ctx, &longhorn.Volume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 3, RecurringJobs: jobs},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	volume("vol-a", snapHourly, backupDaily)
	volume("vol-b", snapHourly2)
	volume("vol-c")

	jobsYAML, err := yaml.Marshal([]longhorn.VolumeRecurringJobSpec{classJob})
	must(t, err)
	_, err = kube.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: f.StorageClass, Labels: map[string]string{"team": "storage"}},
		Provisioner: v110to120.Provisioner,
		Parameters:  map[string]string{"numberOfReplicas": "3", "staleReplicaTimeout": "30", "recurringJobs": string(jobsYAML)},
	}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = kube.StorageV1().StorageClasses().Delete(context.Background(), f.StorageClass, metav1.DeleteOptions{})
	})

	defaultJSON, err := json.Marshal([]longhorn.VolumeRecurringJobSpec{defaultJob})
	must(t, err)
	scYAML := "kind: StorageClass\napiVersion: storage.k8s.io/v1\nmetadata:\n  name: longhorn\nprovisioner: driver.longhorn.io\nallowVolumeExpansion: true\nparameters:\n  numberOfReplicas: \"3\"\n  recurringJobs: '" + string(defaultJSON) + "'\n"
	_, err = kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: v110to120.StorageClassConfigMap},
		Data:       map[string]string{"storageclass.yaml": scYAML},
	}, metav1.CreateOptions{})
	must(t, err)

	cron := func(name, volume string) {
		labels := map[string]string{}
		if volume != "" {
			labels["longhornvolume"] = volume
		}
		_, err := kube.BatchV1().CronJobs(namespace).Create(ctx, &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{Name: "c", Image: "longhornio/longhorn-manager:v1.1.0"}},
			}}}}},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	cron("vol-a-snap-c", "vol-a")
	cron("vol-a-bak-c", "vol-a")
	cron("vol-b-snap2-c", "vol-b")
	cron("vol-gone-old-c", "vol-gone")
	cron("keep-me", "")

	// The backup settings of a cluster from before BackupTarget objects.
	for name, value := range map[types.SettingName]string{
		types.SettingNameBackupTarget:                 BackupTargetURL,
		types.SettingNameBackupTargetCredentialSecret: "s3-secret",
		types.SettingNameBackupstorePollInterval:      "600",
	} {
		_, err := lh.LonghornV1beta2().Settings(namespace).Create(ctx, &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(name)}, Value: value}, metav1.CreateOptions{})
		must(t, err)
	}
	return f
}

// BackupTargetURL is the fixture's backup-target setting.
const BackupTargetURL = "s3://backups@us-east-1/cluster-a"

func name(t testing.TB, entry longhorn.VolumeRecurringJobSpec) string {
	t.Helper()
	n, err := v110to120.JobName(entry)
	must(t, err)
	return n
}

// AssertMigrated checks the new state exactly.
func (f *Fixture) AssertMigrated(t testing.TB) {
	t.Helper()
	f.assertMigrated(t, true)
}

// AssertMigratedLeavingStorageClass checks the migration of a manager
// that may not list StorageClasses (package/components/upgrade-from-v1.1/rbac-upgrade-storageclasses.yaml
// not applied): everything else migrated, and the fixture's class left as
// it was, recurringJobs and all, with no job made from it.
func (f *Fixture) AssertMigratedLeavingStorageClass(t testing.TB) {
	t.Helper()
	f.assertMigrated(t, false)
}

func (f *Fixture) assertMigrated(t testing.TB, classRewritten bool) {
	t.Helper()
	ctx := context.Background()
	ns := f.Namespace

	jobs, err := f.lh.LonghornV1beta2().RecurringJobs(ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	want := map[string]longhorn.VolumeRecurringJobSpec{}
	wantJobs := []longhorn.VolumeRecurringJobSpec{snapHourly, backupDaily, defaultJob}
	if classRewritten {
		wantJobs = append(wantJobs, classJob)
	}
	for _, e := range wantJobs {
		want[name(t, e)] = e
	}
	if len(jobs.Items) != len(want) {
		var got []string
		for _, j := range jobs.Items {
			got = append(got, j.Name)
		}
		t.Fatalf("RecurringJobs %v, want exactly %d", got, len(want))
	}
	for _, j := range jobs.Items {
		e, ok := want[j.Name]
		if !ok {
			t.Errorf("unexpected RecurringJob %s", j.Name)
			continue
		}
		if string(j.Spec.Task) != e.Task || j.Spec.Cron != e.Cron || j.Spec.Retain != e.Retain || j.Spec.Concurrency != 10 || len(j.Spec.Labels) != len(e.Labels) || len(j.Spec.Groups) != 0 {
			t.Errorf("RecurringJob %s spec %+v, from %+v", j.Name, j.Spec, e)
		}
	}

	wantLabels := map[string][]string{
		"vol-a": {"recurring-job.longhorn.io/" + name(t, snapHourly), "recurring-job.longhorn.io/" + name(t, backupDaily)},
		"vol-b": {"recurring-job.longhorn.io/" + name(t, snapHourly)},
		"vol-c": {"recurring-job-group.longhorn.io/default"},
	}
	for vol, keys := range wantLabels {
		v, err := f.lh.LonghornV1beta2().Volumes(ns).Get(ctx, vol, metav1.GetOptions{})
		must(t, err)
		if len(v.Spec.RecurringJobs) != 0 {
			t.Errorf("volume %s still has spec.recurringJobs %+v", vol, v.Spec.RecurringJobs)
		}
		var got []string
		for k, val := range v.Labels {
			if strings.HasPrefix(k, "recurring-job") {
				got = append(got, k)
				if val != "enabled" {
					t.Errorf("volume %s label %s=%s", vol, k, val)
				}
			}
		}
		sort.Strings(got)
		sort.Strings(keys)
		if strings.Join(got, ",") != strings.Join(keys, ",") {
			t.Errorf("volume %s labels %v, want %v", vol, got, keys)
		}
	}

	sc, err := f.kube.StorageV1().StorageClasses().Get(ctx, f.StorageClass, metav1.GetOptions{})
	must(t, err)
	_, hasJobs := sc.Parameters["recurringJobs"]
	if hasJobs == classRewritten || sc.Parameters["numberOfReplicas"] != "3" || sc.Parameters["staleReplicaTimeout"] != "30" || sc.Labels["team"] != "storage" {
		t.Errorf("StorageClass %s parameters %v labels %v (rewritten: %v)", sc.Name, sc.Parameters, sc.Labels, classRewritten)
	}
	wantSelector := `[{"name":"` + name(t, classJob) + `","isGroup":false}]`
	if !classRewritten {
		wantSelector = ""
	}
	if sc.Parameters["recurringJobSelector"] != wantSelector {
		t.Errorf("StorageClass recurringJobSelector %q, want %q", sc.Parameters["recurringJobSelector"], wantSelector)
	}

	cm, err := f.kube.CoreV1().ConfigMaps(ns).Get(ctx, v110to120.StorageClassConfigMap, metav1.GetOptions{})
	must(t, err)
	var doc struct {
		Parameters           map[string]string `json:"parameters"`
		AllowVolumeExpansion bool              `json:"allowVolumeExpansion"`
	}
	must(t, yaml.Unmarshal([]byte(cm.Data["storageclass.yaml"]), &doc))
	if _, ok := doc.Parameters["recurringJobs"]; ok || !doc.AllowVolumeExpansion ||
		doc.Parameters["recurringJobSelector"] != `[{"name":"`+name(t, defaultJob)+`","isGroup":false}]` {
		t.Errorf("default StorageClass YAML %s", cm.Data["storageclass.yaml"])
	}

	for _, gone := range []string{"vol-a-snap-c", "vol-a-bak-c", "vol-b-snap2-c", "vol-gone-old-c"} {
		if _, err := f.kube.BatchV1().CronJobs(ns).Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("old CronJob %s still there (err %v)", gone, err)
		}
	}
	if _, err := f.kube.BatchV1().CronJobs(ns).Get(ctx, "keep-me", metav1.GetOptions{}); err != nil {
		t.Errorf("an unrelated CronJob was touched: %v", err)
	}
	version, err := f.kube.CoreV1().ConfigMaps(ns).Get(ctx, "longhorn-manager-data-version", metav1.GetOptions{})
	must(t, err)
	bt, err := f.lh.LonghornV1beta2().BackupTargets(ns).Get(ctx, "default", metav1.GetOptions{})
	must(t, err)
	if want := (longhorn.BackupTargetSpec{BackupTargetURL: BackupTargetURL, CredentialSecret: "s3-secret", PollInterval: metav1.Duration{Duration: 10 * time.Minute}}); bt.Spec != want {
		t.Errorf("default BackupTarget spec %+v, want %+v from the settings", bt.Spec, want)
	}
	if version.Data["version"] != "v1.8.0" {
		t.Errorf("recorded data version %v", version.Data)
	}
	leftovers, err := f.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, c := range leftovers.Items {
		if strings.HasPrefix(c.Name, "longhorn-manager-upgrade-sc-") {
			t.Errorf("StorageClass backup %s left behind", c.Name)
		}
	}
}

// Versions returns the resource version of every object the migration
// writes, to show that a second run writes nothing.
func (f *Fixture) Versions(t testing.TB) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	jobs, err := f.lh.LonghornV1beta2().RecurringJobs(f.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, j := range jobs.Items {
		out["recurringjob/"+j.Name] = string(j.UID)
	}
	vols, err := f.lh.LonghornV1beta2().Volumes(f.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, v := range vols.Items {
		out["volume/"+v.Name] = v.ResourceVersion
	}
	sc, err := f.kube.StorageV1().StorageClasses().Get(ctx, f.StorageClass, metav1.GetOptions{})
	must(t, err)
	out["storageclass"] = sc.ResourceVersion
	if bt, err := f.lh.LonghornV1beta2().BackupTargets(f.Namespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
		// Its status follows the target's polls: the object and its
		// spec are what a migration or a start must leave alone.
		out["backuptarget/default"] = fmt.Sprintf("%s/%d", bt.UID, bt.Generation)
	}
	cms, err := f.kube.CoreV1().ConfigMaps(f.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" {
			out["configmap/"+c.Name] = c.ResourceVersion
		}
	}
	return out
}
