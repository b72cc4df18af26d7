//go:build e2e

package manager

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

func TestDaemonRegistersNodeAndSettingsAsItsServiceAccount(t *testing.T) {
	logrus.SetLevel(logrus.WarnLevel)
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	framework.InstallRBAC(t, cluster.KubeClient(t), ns)
	saConfig := cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	admin := framework.LHClient(t, cluster.Config)
	dataDir := t.TempDir()

	d := framework.StartDaemon(t, saConfig, ns, "node-1", dataDir)

	resp, err := http.Get("http://" + d.APIAddress + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz answered %d once ready", resp.StatusCode)
	}

	// Every default setting exists with its default value, or the one
	// the tests' daemons create it with (--default-setting).
	initial := framework.TestDefaultSettings()
	for _, name := range types.SettingNames() {
		s, err := admin.LonghornV1beta2().Settings(ns).Get(context.Background(), string(name), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("setting %s: %v", name, err)
		}
		def, _ := types.GetSettingDefinition(name)
		want, given := initial[name]
		if !given {
			want = def.Default
		}
		if s.Value != want {
			t.Errorf("setting %s = %q, want %q", name, s.Value, want)
		}
	}

	// The node is registered, Ready, with one disk at the data folder whose
	// UUID is the one in the disk's config file and whose space is real.
	var node *longhorn.Node
	framework.Eventually(t, 20*time.Second, "node Ready with a ready disk", func() (bool, error) {
		node, err = admin.LonghornV1beta2().Nodes(ns).Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if !datastore.IsNodeReady(node) || len(node.Status.DiskStatus) != 1 {
			return false, nil
		}
		for _, st := range node.Status.DiskStatus {
			if st.DiskUUID == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if len(node.Spec.Disks) != 1 {
		t.Fatalf("node has %d disks, want 1", len(node.Spec.Disks))
	}
	var diskName string
	for name, spec := range node.Spec.Disks {
		diskName = name
		if spec.Path != dataDir {
			t.Errorf("disk path %q, want %q", spec.Path, dataDir)
		}
	}
	cfgData, err := os.ReadFile(filepath.Join(dataDir, "longhorn-disk.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	st := node.Status.DiskStatus[diskName]
	if !strings.Contains(string(cfgData), st.DiskUUID) {
		t.Errorf("disk UUID %s is not the one in longhorn-disk.cfg: %s", st.DiskUUID, cfgData)
	}
	if st.StorageMaximum <= 0 || st.StorageAvailable <= 0 || st.StorageAvailable > st.StorageMaximum {
		t.Errorf("disk space not real: maximum %d, available %d", st.StorageMaximum, st.StorageAvailable)
	}

	// A user's change to a setting survives a restart, and so do the
	// node and its disk UUID.
	// The setting controller writes the status meanwhile: retry conflicts.
	if err := datastore.RetryOnConflict(func() error {
		setting, err := admin.LonghornV1beta2().Settings(ns).Get(context.Background(), string(types.SettingNameRecurringJobMaxRetention), metav1.GetOptions{})
		if err != nil {
			return err
		}
		setting.Value = "50"
		_, err = admin.LonghornV1beta2().Settings(ns).Update(context.Background(), setting, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if took := d.Stop(t); took > 5*time.Second {
		t.Errorf("daemon took %s to stop, want a few seconds at most", took)
	}

	framework.StartDaemon(t, saConfig, ns, "node-1", dataDir)
	setting, err := admin.LonghornV1beta2().Settings(ns).Get(context.Background(), string(types.SettingNameRecurringJobMaxRetention), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if setting.Value != "50" {
		t.Errorf("restart reset the user's setting to %q", setting.Value)
	}
	again, err := admin.LonghornV1beta2().Nodes(ns).Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.DiskStatus[diskName] == nil || again.Status.DiskStatus[diskName].DiskUUID != st.DiskUUID {
		t.Errorf("disk UUID changed across a restart: %+v", again.Status.DiskStatus)
	}
}

func TestInvalidSettingIsNotAppliedAndWarned(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	framework.InstallRBAC(t, cluster.KubeClient(t), ns)
	admin := framework.LHClient(t, cluster.Config)
	framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", t.TempDir())

	name := string(types.SettingNameRecurringJobMaxRetention)
	if err := datastore.RetryOnConflict(func() error {
		s, err := admin.LonghornV1beta2().Settings(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Value = "0"
		_, err = admin.LonghornV1beta2().Settings(ns).Update(context.Background(), s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Second, "setting marked not applied", func() (bool, error) {
		s, err := admin.LonghornV1beta2().Settings(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && !s.Status.Applied, nil
	})
	kube := cluster.KubeClient(t)
	framework.Eventually(t, 10*time.Second, "Warning event naming the rule", func() (bool, error) {
		events, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			t.Logf("event %s %s %s: %s", e.InvolvedObject.Kind, e.Type, e.Reason, e.Message)
			if e.Type == corev1.EventTypeWarning && e.Reason == "InvalidValue" && strings.Contains(e.Message, "between 1 and 250") {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestServiceAccountHasNoRightsBeyondItsNamespace(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	other := cluster.NewNamespace(t)
	framework.InstallRBAC(t, cluster.KubeClient(t), ns)
	sa, err := kubernetes.NewForConfig(cluster.ServiceAccountConfig(ns, framework.ServiceAccount))
	if err != nil {
		t.Fatal(err)
	}
	saLH := framework.LHClient(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount))
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["list settings in another namespace"] = saLH.LonghornV1beta2().Settings(other).List(ctx, metav1.ListOptions{})
	_, checks["list secrets in its namespace"] = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	_, checks["get a secret in another namespace"] = sa.CoreV1().Secrets(other).Get(ctx, "s3-secret", metav1.GetOptions{})
	// It lists Nodes (their pod ranges, which downloads may not reach),
	// and may read no more of them.
	_, checks["get a Kubernetes node"] = sa.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	_, checks["watch Kubernetes nodes"] = sa.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	checks["delete a Kubernetes node"] = sa.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{})
	_, checks["update a claim"] = sa.CoreV1().PersistentVolumeClaims(other).Update(ctx,
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: other}}, metav1.UpdateOptions{})
	// It creates PVs and claims (a system restore's), and changes or
	// deletes none.
	checks["delete a PersistentVolume"] = sa.CoreV1().PersistentVolumes().Delete(ctx, "pv-x", metav1.DeleteOptions{})
	checks["delete a claim"] = sa.CoreV1().PersistentVolumeClaims(other).Delete(ctx, "x", metav1.DeleteOptions{})
	checks["delete a Longhorn node"] = saLH.LonghornV1beta2().Nodes(ns).Delete(ctx, "node-1", metav1.DeleteOptions{})
	for what, err := range checks {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want Forbidden, got %v", what, err)
		}
	}
	if _, err := saLH.LonghornV1beta2().Settings(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list settings in its own namespace: %v", err)
	}
	// It reads the Secrets it is named, by name: the internal TLS ones and
	// the backup credential rbac.yaml grants; any other only once an
	// administrator grants it (docs/deploying.md, "Backup credentials").
	for _, name := range []string{mtls.CASecretName, mtls.ServerSecretName, mtls.DataSourceSecretName, types.BackupCredentialSecretName} {
		if _, err := sa.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("get Secret %s in its own namespace: want it or NotFound, got %v", name, err)
		}
	}
	if _, err := sa.CoreV1().Secrets(ns).Get(ctx, "s3-secret", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get a Secret no one granted: want Forbidden, got %v", err)
	}
	framework.GrantSecret(t, cluster, cluster.KubeClient(t), ns, "s3-secret")
	if _, err := sa.CoreV1().Secrets(ns).Get(ctx, "s3-secret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get a granted Secret: want NotFound, got %v", err)
	}
	// StorageClasses are rbac-upgrade-storageclasses.yaml's, not applied.
	if _, err := sa.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list StorageClasses without the upgrade's file: want Forbidden, got %v", err)
	}
}

func TestDaemonFailsFastWhenTheAPIIsUnreachable(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := app.RunDaemon(ctx, cfg, app.DaemonOptions{Namespace: "longhorn-system", NodeName: "n", DataDir: t.TempDir(), APIAddress: "127.0.0.1:0", CronJob: framework.TestCronJobConfig})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Kubernetes API at https://127.0.0.1:1") {
		t.Fatalf("want a clear error naming the API address, got %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans several lines: %q", err)
	}
}

func TestDaemonRefusesAMissingNodeName(t *testing.T) {
	err := app.RunDaemon(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, app.DaemonOptions{DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--node-name") {
		t.Fatalf("want an error naming --node-name, got %v", err)
	}
}

func TestDaemonRefusesAnUnknownBackingImageServerRunner(t *testing.T) {
	// The API is unreachable: the error must come before any call to it.
	err := app.RunDaemon(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, app.DaemonOptions{NodeName: "n", DataDir: t.TempDir(),
		CronJob: framework.TestCronJobConfig, BackingImageServerRunner: "kubelet"})
	if err == nil || !strings.Contains(err.Error(), `--backing-image-server-runner must be "process" or "pod", got "kubelet"`) {
		t.Fatalf("want an error naming --backing-image-server-runner, got %v", err)
	}
}
