package crds_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclient "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// A create that reads another object needs its maker's right to read it,
// through kubectl or any client, not only through the API
// (policies/reads-source.yaml): a tenant with create on volumes,
// backingimages and backuptargets but no get on the victim volume, the
// backing image or the Secret is refused each copy, naming the field and
// the rule; once granted get on them, the same creates pass. An update
// that keeps the field is not asked again.
func TestACreateThatReadsAnotherObjectNeedsItsMakersRightToReadIt(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	// No manager runs here; the apiserver alone answers.
	ns := cluster.NewPlainNamespace(t)
	ctx := context.Background()
	kube := cluster.KubeClient(t)
	const tenant = "tenant"
	// create on the kinds, and get and update on the tenant's own
	// objects only (by name): the victim, the image and the Secret are
	// not among them.
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"volumes", "backingimages", "backuptargets"}, Verbs: []string{"create"}},
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"volumes", "backingimages", "backuptargets"},
			Verbs: []string{"get", "update", "patch"}, ResourceNames: []string{"mine", "copy", "exported", "target"}},
	}
	role, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: tenant}, Rules: rules}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: tenant},
			// The manager's account, with the tenant's rights alone.
			{Kind: rbacv1.ServiceAccountKind, Name: "longhorn-service-account", Namespace: ns}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	admin := client(t)
	if _, err := admin.LonghornV1beta2().Volumes(ns).Create(ctx, &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "victim"},
		Spec: longhorn.VolumeSpec{Size: 1 << 20, NumberOfReplicas: 1}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin string) (string, error) {
		return cluster.TryKubectl(stdin, "-n", ns, "--as", tenant, "create", "-f", "-")
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"a volume copied from another volume", `apiVersion: longhorn.io/v1beta2
kind: Volume
metadata: {name: copy}
spec: {size: "1048576", numberOfReplicas: 1, dataSource: "vol://victim"}`, `spec.dataSource: tenant may not get volume "victim"`},
		{"a volume copied from another volume's snapshot", `apiVersion: longhorn.io/v1beta2
kind: Volume
metadata: {name: copy}
spec: {size: "1048576", numberOfReplicas: 1, dataSource: "snap://victim/s1"}`, `spec.dataSource: tenant may not get volume "victim"`},
		{"a volume on a backing image", `apiVersion: longhorn.io/v1beta2
kind: Volume
metadata: {name: copy}
spec: {size: "1048576", numberOfReplicas: 1, backingImage: "golden"}`, `spec.backingImage: tenant may not get backing image "golden"`},
		{"a volume restored from a backup", `apiVersion: longhorn.io/v1beta2
kind: Volume
metadata: {name: copy}
spec: {size: "1048576", numberOfReplicas: 1, fromBackup: "s3://bucket@us-east-1/?backup=backup-1&volume=victim"}`, `spec.fromBackup: tenant may not get backupvolumes`},
		{"a backing image exported from a volume", `apiVersion: longhorn.io/v1beta2
kind: BackingImage
metadata: {name: exported}
spec: {sourceType: export-from-volume, sourceParameters: {volume-name: victim}}`, `spec.sourceParameters.volume-name: tenant may not get volume "victim"`},
		{"a backup target with another's Secret", `apiVersion: longhorn.io/v1beta2
kind: BackupTarget
metadata: {name: target}
spec: {backupTargetURL: "s3://bucket@us-east-1/", credentialSecret: longhorn-internal-ca, pollInterval: 5m0s}`, `spec.credentialSecret: tenant may not get secret "longhorn-internal-ca"`},
	} {
		out, err := kubectl(tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rule ") {
			t.Errorf("%s: %q, %v; want refused saying %q and the rule", tc.name, out, err, tc.want)
		}
	}
	// Nothing was created by the refused requests.
	if list, err := admin.LonghornV1beta2().Volumes(ns).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Errorf("volumes after the refusals: %v, %v; want the victim alone", list, err)
	}

	// The manager's own account is not asked: it writes for the API's
	// callers, whom the API checks itself. It has no right on the victim
	// here, and its copy passes.
	if out, err := cluster.TryKubectl(`apiVersion: longhorn.io/v1beta2
kind: Volume
metadata: {name: by-the-manager}
spec: {size: "1048576", numberOfReplicas: 1, dataSource: "vol://victim"}`, "-n", ns, "--as", "system:serviceaccount:"+ns+":longhorn-service-account", "create", "-f", "-"); err != nil {
		t.Errorf("a copy made by the manager's account: %s %v", out, err)
	}
	if err := admin.LonghornV1beta2().Volumes(ns).Delete(ctx, "by-the-manager", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// A volume that reads nothing needs nothing more.
	if out, err := kubectl(`apiVersion: longhorn.io/v1beta2
kind: Volume
metadata: {name: mine}
spec: {size: "1048576", numberOfReplicas: 1}`); err != nil {
		t.Fatalf("a plain volume: %s %v", out, err)
	}
	// Granted get on the sources, the same creates pass.
	if _, err := kube.RbacV1().Roles(ns).Update(ctx, withRule(role, rbacv1.PolicyRule{APIGroups: []string{"longhorn.io"},
		Resources: []string{"volumes"}, Verbs: []string{"get"}, ResourceNames: []string{"victim"}}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, func() error {
		_, err := kubectl(`apiVersion: longhorn.io/v1beta2
kind: Volume
metadata: {name: copy}
spec: {size: "1048576", numberOfReplicas: 1, dataSource: "vol://victim"}`)
		return err
	})
	// An update that keeps the source is not asked again, even once the
	// right is gone: the copy was allowed when it was made.
	role, _ = kube.RbacV1().Roles(ns).Get(ctx, role.Name, metav1.GetOptions{})
	role.Rules = role.Rules[:len(role.Rules)-1]
	if _, err := kube.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantClient := lhclient.NewForConfigOrDie(impersonate(cluster, tenant))
	waitAllowed(t, func() error {
		v, err := tenantClient.LonghornV1beta2().Volumes(ns).Get(ctx, "copy", metav1.GetOptions{})
		if err != nil {
			return err
		}
		v.Spec.NumberOfReplicas = 2
		_, err = tenantClient.LonghornV1beta2().Volumes(ns).Update(ctx, v, metav1.UpdateOptions{})
		return err
	})
	// ... but changing it to another source is.
	v, err := tenantClient.LonghornV1beta2().Volumes(ns).Get(ctx, "mine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.Spec.DataSource = "vol://victim"
	if _, err := tenantClient.LonghornV1beta2().Volumes(ns).Update(ctx, v, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "create-reads-source") {
		t.Errorf("an update to a source the tenant may not read: %v, want refused", err)
	}
}

func withRule(role *rbacv1.Role, rule rbacv1.PolicyRule) *rbacv1.Role {
	role = role.DeepCopy()
	role.Rules = append(role.Rules, rule)
	return role
}

// waitAllowed retries f until it succeeds: a Role's change reaches the
// authorizer a moment after it is written.
func waitAllowed(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused after the grant: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func impersonate(cluster *testcluster.Cluster, user string) *rest.Config {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return cfg
}
