//go:build e2e

package systembackup

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// me is the user kube authenticates as, as a restore records its
// requester: a SystemRestore made with kubectl records its maker
// (policies/system-restore-requester.yaml).
func me(t *testing.T, kube kubernetes.Interface) *longhorn.SystemRestoreRequester {
	t.Helper()
	r, err := kube.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := r.Status.UserInfo
	req := &longhorn.SystemRestoreRequester{Username: u.Username, UID: u.UID, Groups: u.Groups}
	for k, v := range u.Extra {
		if req.Extra == nil {
			req.Extra = map[string][]string{}
		}
		req.Extra[k] = v
	}
	return req
}

// restoreError waits for restore name to fail and returns its Error
// condition's message; a restore that completes fails the test.
func restoreError(t *testing.T, e *framework.APIEnv, name string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, 30*time.Second, "restore "+name+" in Error", func() (bool, error) {
		sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if sr.Status.State == longhorn.SystemRestoreStateCompleted {
			t.Fatalf("restore %s completed", name)
		}
		for _, c := range sr.Status.Conditions {
			if sr.Status.State == longhorn.SystemRestoreStateError && c.Type == longhorn.SystemRestoreConditionTypeError {
				msg = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	return msg
}

// TestARestoreMakesOnlyWhatItsRequesterMayMake: a tenant who may ask for
// restores and create recurring jobs, but not backing images, asks for
// the restore of an archive holding both: it fails naming the backing
// image and the right, and makes neither (not the job either). The
// tenant may not record another as the requester, nor may an admin make
// a restore that records no one; one made without a record all the same
// (by the manager's own account, as an object made before the record
// existed) is refused by the controller. Granted the rights, the
// tenant's restore makes both.
func TestARestoreMakesOnlyWhatItsRequesterMayMake(t *testing.T) {
	t.Parallel()
	// The restore makes a backing image: its manager runs from this test
	// binary as a server (without it the binary would run as a second
	// test run, with a control plane of its own that outlives it).
	e := framework.NewAPIEnv(t, framework.WithTestServers)
	root := t.TempDir()
	jobs := "apiVersion: longhorn.io/v1beta2\nkind: RecurringJobList\nitems:\n- metadata: {name: planted}\n  spec: {task: snapshot, cron: '0 1 * * *', retain: 1, concurrency: 1}\n"
	images := "apiVersion: longhorn.io/v1beta2\nkind: BackingImageList\nitems:\n- metadata: {name: exported}\n" +
		"  spec: {sourceType: export-from-volume, sourceParameters: {volume-name: victim, export-type: raw}}\n"
	plant(t, root, "v1.9.0", "mixed", map[string]string{
		"mixed/metadata.yaml":                     "longhornVersion: v1.9.0\n",
		"mixed/yamls/longhorn/recurringjobs.yaml": jobs,
		"mixed/yamls/longhorn/backingimages.yaml": images,
	})
	e.SetBackupTarget(t, "file://"+root)
	ctx := context.Background()
	framework.Eventually(t, 30*time.Second, "the planted archive's SystemBackup Ready", func() (bool, error) {
		sb, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).Get(ctx, "mixed", metav1.GetOptions{})
		return err == nil && sb.Status.State == longhorn.SystemBackupStateReady, nil
	})

	const tenant = "tenant"
	role, err := e.Kube.RbacV1().Roles(e.NS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: tenant}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"systemrestores"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"recurringjobs"}, Verbs: []string{"create"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: tenant}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenant, Groups: []string{"system:authenticated"}}
	asTenant := framework.LHClient(t, cfg)
	restore := func(name string, req *longhorn.SystemRestoreRequester) *longhorn.SystemRestore {
		return &longhorn.SystemRestore{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: longhorn.SystemRestoreSpec{SystemBackup: "mixed", Requester: req}}
	}
	tenantReq := &longhorn.SystemRestoreRequester{Username: tenant, Groups: []string{"system:authenticated"}}
	framework.Eventually(t, 10*time.Second, "the tenant's restore made", func() (bool, error) {
		_, err := asTenant.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, restore("refused", tenantReq), metav1.CreateOptions{})
		return err == nil, nil
	})
	msg := restoreError(t, e, "refused")
	if want := "BackingImage exported: tenant may not create backingimages.longhorn.io in " + e.NS; !strings.Contains(msg, want) {
		t.Errorf("the refusal %q does not say %q", msg, want)
	}
	if want := `tenant may not get volumes.longhorn.io "victim"`; !strings.Contains(msg, want) {
		t.Errorf("the refusal %q does not say %q", msg, want)
	}
	e.Call(t, "GET", "/v1/recurringjobs/planted", "").Expect(t, 404)
	e.Call(t, "GET", "/v1/backingimages/exported", "").Expect(t, 404)

	// The tenant may not record an admin; a restore that records no one
	// records its maker (the mutating policy; a dry run, so the admin's
	// restore restores nothing).
	if _, err := asTenant.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, restore("forged", me(t, e.Kube)), metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "rule system-restore-requester") {
		t.Errorf("a restore recording another: %v, want refused by the policy", err)
	}
	admin := me(t, e.Kube)
	if sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, restore("no-one", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil ||
		sr.Spec.Requester == nil || sr.Spec.Requester.Username != admin.Username {
		t.Errorf("a restore recording no one: %v, requester %+v, want its maker %s recorded", err, requesterOf(sr), admin.Username)
	}
	// One that reaches the manager with no one recorded all the same (a
	// cluster without the mutating policy; here an empty record, which
	// the manager's account may write): refused.
	manager := framework.LHClient(t, e.Cluster.ServiceAccountConfig(e.NS, framework.ServiceAccount))
	if _, err := manager.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, restore("unrecorded", &longhorn.SystemRestoreRequester{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if msg := restoreError(t, e, "unrecorded"); !strings.Contains(msg, "spec.requester: not recorded") {
		t.Errorf("a restore recording no one failed saying %q", msg)
	}
	e.Call(t, "GET", "/v1/recurringjobs/planted", "").Expect(t, 404)

	// Granted create on backing images and get on the volume, the
	// tenant's restore makes both.
	role.Rules = append(role.Rules,
		rbacv1.PolicyRule{APIGroups: []string{"longhorn.io"}, Resources: []string{"backingimages"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"longhorn.io"}, Resources: []string{"volumes"}, Verbs: []string{"get"}, ResourceNames: []string{"victim"}})
	if _, err := e.Kube.RbacV1().Roles(e.NS).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "a restore by the granted tenant completed", func() (bool, error) {
		// The grant reaches the authorizer a moment after it is written:
		// a restore refused before it is made again.
		sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(ctx, "granted", metav1.GetOptions{})
		switch {
		case err != nil:
			_, err = asTenant.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, restore("granted", tenantReq), metav1.CreateOptions{})
			return false, err
		case sr.Status.State == longhorn.SystemRestoreStateError:
			return false, e.LH.LonghornV1beta2().SystemRestores(e.NS).Delete(ctx, "granted", metav1.DeleteOptions{})
		}
		return sr.Status.State == longhorn.SystemRestoreStateCompleted, nil
	})
	e.Call(t, "GET", "/v1/recurringjobs/planted", "").Expect(t, 200)
	e.Call(t, "GET", "/v1/backingimages/exported", "").Expect(t, 200)
}

// TestARestoreAskedThroughTheAPIHasItsCallersRights: with
// --api-auth=kubernetes the API records its caller as the restore's
// requester. A tenant (a ServiceAccount) who may ask for restores and
// create volumes and recurring jobs, but not PVs, nor claims in the
// workload's namespace, nor backing images, asks through the API for
// the restore of an archive holding a volume, its PV and claim, a
// backing image and a recurring job: the restore fails naming each
// missing right, and makes none of them.
func TestARestoreAskedThroughTheAPIHasItsCallersRights(t *testing.T) {
	t.Parallel()
	// Backing image servers from this test binary, as above.
	e, _ := framework.KubernetesAuthAPIEnv(t, framework.WithTestServers)
	ctx := context.Background()
	account := func(name string) {
		if _, err := e.Kube.CoreV1().ServiceAccounts(e.NS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	account("admin")
	binding, err := e.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admin-" + e.NS},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "admin", Namespace: e.NS}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	e.Token = framework.TokenOf(t, e.Kube, e.NS, "admin")
	account("tenant")
	if _, err := e.Kube.RbacV1().Roles(e.NS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"systemrestores", "volumes", "recurringjobs"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"backupvolumes"}, Verbs: []string{"get"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tenant", Namespace: e.NS}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenantToken := framework.TokenOf(t, e.Kube, e.NS, "tenant")

	app := e.Cluster.NewPlainNamespace(t)
	root := t.TempDir()
	plant(t, root, "v1.9.0", "workload", map[string]string{
		"workload/metadata.yaml": "longhornVersion: v1.9.0\n",
		"workload/yamls/longhorn/recurringjobs.yaml": "apiVersion: longhorn.io/v1beta2\nkind: RecurringJobList\nitems:\n" +
			"- metadata: {name: planted}\n  spec: {task: snapshot, cron: '0 1 * * *', retain: 1, concurrency: 1}\n",
		"workload/yamls/longhorn/backingimages.yaml": "apiVersion: longhorn.io/v1beta2\nkind: BackingImageList\nitems:\n" +
			"- metadata: {name: golden}\n  spec: {sourceType: download, sourceParameters: {url: 'http://images.example/golden.raw'}}\n",
		"workload/yamls/longhorn/volumes.yaml": "apiVersion: longhorn.io/v1beta2\nkind: VolumeList\nitems:\n" +
			"- metadata: {name: data}\n  spec: {size: '8388608', numberOfReplicas: 1}\n  status: {lastBackup: backup-1}\n",
		"workload/yamls/kubernetes/persistentvolumes.yaml": "apiVersion: v1\nkind: PersistentVolumeList\nitems:\n" +
			"- metadata: {name: pv-" + app + "}\n  spec: {capacity: {storage: 8Mi}, accessModes: [ReadWriteOnce], storageClassName: longhorn-static,\n" +
			"    claimRef: {namespace: " + app + ", name: data}, csi: {driver: driver.longhorn.io, volumeHandle: data}}\n",
		"workload/yamls/kubernetes/persistentvolumeclaims.yaml": "apiVersion: v1\nkind: PersistentVolumeClaimList\nitems:\n" +
			"- metadata: {name: data, namespace: " + app + "}\n  spec: {accessModes: [ReadWriteOnce], storageClassName: longhorn-static, volumeName: pv-" + app + ",\n" +
			"    resources: {requests: {storage: 8Mi}}}\n",
	})
	e.SetBackupTarget(t, "file://"+root)
	framework.Eventually(t, 30*time.Second, "the planted archive's SystemBackup Ready", func() (bool, error) {
		sb, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).Get(ctx, "workload", metav1.GetOptions{})
		return err == nil && sb.Status.State == longhorn.SystemBackupStateReady, nil
	})
	e.Call(t, "POST", "/v1/systemrestores", `{"name":"by-tenant","systemBackup":"workload"}`, "Authorization", "Bearer "+tenantToken).Expect(t, 200)
	sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(ctx, "by-tenant", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenantUser := "system:serviceaccount:" + e.NS + ":tenant"
	if req := sr.Spec.Requester; req == nil || req.Username != tenantUser || req.UID == "" {
		t.Fatalf("the API recorded %+v, want the tenant's account", req)
	}
	msg := restoreError(t, e, "by-tenant")
	for _, want := range []string{
		"BackingImage golden: " + tenantUser + " may not create backingimages.longhorn.io in " + e.NS,
		"PersistentVolume pv-" + app + ": " + tenantUser + " may not create persistentvolumes",
		"PersistentVolumeClaim " + app + "/data: " + tenantUser + " may not create persistentvolumeclaims in " + app,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	for _, right := range []string{"create recurringjobs", "create volumes"} {
		if strings.Contains(msg, right) {
			t.Errorf("the refusal %q names %q, which the tenant has", msg, right)
		}
	}
	e.Call(t, "GET", "/v1/recurringjobs/planted", "").Expect(t, 404)
	e.Call(t, "GET", "/v1/volumes/data", "").Expect(t, 404)
	if _, err := e.Kube.CoreV1().PersistentVolumes().Get(ctx, "pv-"+app, metav1.GetOptions{}); err == nil {
		t.Error("the refused restore made the PV")
	}
}

func requesterOf(sr *longhorn.SystemRestore) *longhorn.SystemRestoreRequester {
	if sr == nil {
		return nil
	}
	return sr.Spec.Requester
}
