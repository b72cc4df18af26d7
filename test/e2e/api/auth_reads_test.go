//go:build e2e

package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// A create that reads another object needs the caller's right to read it
// (issue: an export-from-volume backing image copied any volume with only
// create on backingimages, and fromBackup needed no right on backups). A
// caller that may create volumes and backing images but read nothing
// cannot clone a volume, restore its backup or export it, and nothing is
// made; a plain create still works, and a get on that one volume,
// granted by name, lets the clone through.
func TestACreateThatReadsAnotherObjectNeedsTheRightToReadIt(t *testing.T) {
	t.Parallel()
	e, _ := framework.KubernetesAuthAPIEnv(t)
	ctx := context.Background()
	e.UIUser(t, "operator", "longhorn-ui-operator")
	e.Token = framework.TokenOf(t, e.Kube, e.NS, "operator")
	e.Call(t, "POST", "/v1/volumes", `{"name":"secret-data","size":"16777216","numberOfReplicas":1}`).Expect(t, http.StatusOK)

	creator := serviceAccountToken(t, e.Kube, e.NS, "creator")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "creator"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"longhorn.io"}, Resources: []string{"volumes", "backingimages"}, Verbs: []string{"create"},
		}},
	}
	if _, err := e.Kube.RbacV1().Roles(e.NS).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.RbacV1().RoleBindings(e.NS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "creator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "creator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "creator", Namespace: e.NS}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := func(method, path, body string) framework.APIResponse {
		return e.Call(t, method, path, body, "Authorization", "Bearer "+creator)
	}
	framework.Eventually(t, 30*time.Second, "the creator's Role in force", func() (bool, error) {
		return as("POST", "/v1/volumes", `{"name":"plain","size":"16777216","numberOfReplicas":1}`).Status == http.StatusOK, nil
	})

	user := "system:serviceaccount:" + e.NS + ":creator"
	as("POST", "/v1/volumes", `{"name":"clone","size":"16777216","numberOfReplicas":1,"dataSource":"vol://secret-data"}`).
		Expect(t, http.StatusForbidden, user, `get volumes.longhorn.io \"secret-data\"`)
	as("POST", "/v1/volumes", `{"name":"snap-clone","size":"16777216","numberOfReplicas":1,"dataSource":"snap://secret-data/s1"}`).
		Expect(t, http.StatusForbidden, `get volumes.longhorn.io \"secret-data\"`)
	as("POST", "/v1/volumes", `{"name":"restored","numberOfReplicas":1,"fromBackup":"s3://bucket@us-east-1/?backup=backup-0123456789abcdef&volume=secret-data"}`).
		Expect(t, http.StatusForbidden, `get backupvolumes.longhorn.io \"secret-data\"`)
	as("POST", "/v1/volumes", `{"name":"based","size":"16777216","numberOfReplicas":1,"backingImage":"golden"}`).
		Expect(t, http.StatusForbidden, `get backingimages.longhorn.io \"golden\"`)
	as("POST", "/v1/backingimages", `{"name":"exported","sourceType":"export-from-volume","parameters":{"volume-name":"secret-data","export-type":"raw"}}`).
		Expect(t, http.StatusForbidden, `get volumes.longhorn.io \"secret-data\"`)
	for _, name := range []string{"clone", "snap-clone", "restored", "based"} {
		if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("volume %s was made by a refused create (%v)", name, err)
		}
	}
	if _, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(ctx, "exported", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the backing image of a refused export was made (%v)", err)
	}

	// A get on that one volume, by name, lets its clone through.
	role.Rules = append(role.Rules, rbacv1.PolicyRule{
		APIGroups: []string{"longhorn.io"}, Resources: []string{"volumes"}, ResourceNames: []string{"secret-data"}, Verbs: []string{"get"},
	})
	if _, err := e.Kube.RbacV1().Roles(e.NS).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the clone allowed once the source may be read", func() (bool, error) {
		r := as("POST", "/v1/volumes", `{"name":"clone","size":"16777216","numberOfReplicas":1,"dataSource":"vol://secret-data"}`)
		return r.Status == http.StatusOK, nil
	})
}
