package framework

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"

	"github.com/cadence-storage/longhorn-manager/types"
)

// SetBackupTarget sets the backup-target setting through the API and
// waits until the API's cache holds it.
func (e *APIEnv) SetBackupTarget(t *testing.T, target string) {
	t.Helper()
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+target+`"}`).Expect(t, 200)
	Eventually(t, 10*time.Second, "backup target in the cache", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, target), nil
	})
}

// CompletedBackupURL waits until the Backup object says Completed and
// answers its URL.
func (e *APIEnv) CompletedBackupURL(t *testing.T, backup string) string {
	t.Helper()
	var url string
	Eventually(t, 30*time.Second, "backup "+backup+" Completed", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{})
		if err == nil && b.Status.State == "Completed" {
			url = b.Status.URL
		}
		return url != "", nil
	})
	return url
}

// BackupCount counts the namespace's Backup objects, and those Completed.
func (e *APIEnv) BackupCount(t *testing.T) (all, completed int) {
	t.Helper()
	list, err := e.LH.LonghornV1beta2().Backups(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list.Items {
		if b.Status.State == "Completed" {
			completed++
		}
	}
	return len(list.Items), completed
}

// SettingWarning waits for a Warning event on a Setting that says every
// fragment.
func (e *APIEnv) SettingWarning(t *testing.T, setting types.SettingName, fragments ...string) {
	t.Helper()
	e.waitEvent(t, "a Warning event on "+string(setting), func(ev corev1.Event) bool {
		return ev.InvolvedObject.Kind == "Setting" && ev.InvolvedObject.Name == string(setting) && ev.Type == corev1.EventTypeWarning
	}, fragments)
}

// WaitEvent waits for an event of reason on the object kind/name
// (Volume, RecurringJob, ...) that says every fragment.
func (e *APIEnv) WaitEvent(t *testing.T, kind, name, reason string, fragments ...string) {
	t.Helper()
	e.waitEvent(t, "a "+reason+" event on "+kind+" "+name, func(ev corev1.Event) bool {
		return ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name && ev.Reason == reason
	}, fragments)
}

// waitEvent waits for an event that match takes and whose message says
// every fragment.
func (e *APIEnv) waitEvent(t *testing.T, what string, match func(corev1.Event) bool, fragments []string) {
	t.Helper()
	Eventually(t, 30*time.Second, what+" saying "+strings.Join(fragments, ", "), func() (bool, error) {
		events, err := e.Kube.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
	next:
		for _, ev := range events.Items {
			if !match(ev) {
				continue
			}
			for _, f := range fragments {
				if !strings.Contains(ev.Message, f) {
					continue next
				}
			}
			return true, nil
		}
		return false, nil
	})
}

// PutSecret creates or replaces the Secret name, and lets the manager
// read it as an administrator would (GrantSecret).
func (e *APIEnv) PutSecret(t *testing.T, name string, data map[string]string) {
	t.Helper()
	GrantSecret(t, e.Cluster, e.Kube, e.NS, name)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}
	secrets := e.Kube.CoreV1().Secrets(e.NS)
	if _, err := secrets.Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		if _, err := secrets.Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// GrantSecret lets the manager's account get the Secret name in ns, as
// docs/deploying.md ("Backup credentials") tells an administrator to for
// a credential of another name than longhorn-backup-credential: in a Role
// of their own, bound to the account. It waits until the grant is in
// force (a get answers NotFound or the Secret, not Forbidden).
func GrantSecret(t testing.TB, cluster *testcluster.Cluster, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	roleName := "backup-credential-" + name
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get"}}},
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		return
	} else if err != nil {
		t.Fatalf("grant Secret %s: %v", name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: roleName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: ServiceAccount, Namespace: ns}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("grant Secret %s: %v", name, err)
	}
	sa, err := kubernetes.NewForConfig(cluster.ServiceAccountConfig(ns, ServiceAccount))
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, "the grant of Secret "+name+" in force", func() (bool, error) {
		_, err := sa.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		return !apierrors.IsForbidden(err), nil
	})
}
