//go:build e2e

package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// serviceAccountToken makes a ServiceAccount and returns a token for it
// from the TokenRequest API, as a pod's projected token would be.
func serviceAccountToken(t *testing.T, kube kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return framework.TokenOf(t, kube, ns, name)
}

// TestAPIKubernetesAuth runs the daemon with --api-auth=kubernetes and
// calls it as two ServiceAccounts: "operator", bound to a Role that
// allows reading volumes, creating them and their actions (but not
// deleting them), and "stranger", bound to nothing.
func TestAPIKubernetesAuth(t *testing.T) {
	t.Parallel()
	e, d := framework.KubernetesAuthAPIEnv(t)
	ns, kube := e.NS, e.Kube
	ctx := context.Background()

	operator := serviceAccountToken(t, kube, ns, "operator")
	stranger := serviceAccountToken(t, kube, ns, "stranger")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "longhorn-volume-operator"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"longhorn.io"}, Resources: []string{"volumes"},
			Verbs: []string{"get", "list", "watch", "create", "update"},
		}},
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "operator", Namespace: ns}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bearer := func(token string) []string { return []string{"Authorization", "Bearer " + token} }

	// The kubelet's probes need no token.
	e.Call(t, "GET", "/healthz", "").Expect(t, 200)
	e.Call(t, "GET", "/readyz", "").Expect(t, 200)

	// No token, a malformed header, a forged token: 401.
	r := e.Call(t, "GET", "/v1/volumes", "").Expect(t, 401, "bearer token")
	if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
	}
	e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Basic YWRtaW46YWRtaW4=").Expect(t, 401, "Bearer")
	e.Call(t, "GET", "/v1/volumes", "", bearer("not-a-token")...).Expect(t, 401, "not valid")
	e.Call(t, "GET", "/v1", "").Expect(t, 401)

	// The binding reaches the apiserver's authorizer through a watch.
	framework.Eventually(t, 10*time.Second, "the operator's Role in force", func() (bool, error) {
		return e.Call(t, "GET", "/v1/volumes", "", bearer(operator)...).Status == 200, nil
	})

	// The stranger is authenticated but allowed nothing.
	e.Call(t, "GET", "/v1", "", bearer(stranger)...).Expect(t, 200)
	e.Call(t, "GET", "/v1/volumes", "", bearer(stranger)...).Expect(t, 403,
		"system:serviceaccount:"+ns+":stranger", "list volumes.longhorn.io", "namespace "+ns)
	e.Call(t, "POST", "/v1/volumes", `{"name":"v1","size":"1Mi"}`, bearer(stranger)...).Expect(t, 403, "create volumes.longhorn.io")
	e.Call(t, "GET", "/v1/settings", "", bearer(stranger)...).Expect(t, 403, "list settings.longhorn.io")
	e.Call(t, "GET", "/metrics", "", bearer(stranger)...).Expect(t, 403, "get /metrics")

	// The operator may do what its Role says, and no more.
	e.Call(t, "POST", "/v1/volumes", `{"name":"v1","size":"1Mi"}`, bearer(operator)...).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "the volume in the cache", func() (bool, error) {
		return e.Call(t, "GET", "/v1/volumes/v1", "", bearer(operator)...).Status == 200, nil
	})
	e.Call(t, "GET", "/v1/volumes/v1", "", bearer(stranger)...).Expect(t, 403, `get volumes.longhorn.io \"v1\"`)
	e.Call(t, "POST", "/v1/volumes/v1?action=recurringJobList", "{}", bearer(operator)...).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/v1?action=recurringJobList", "{}", bearer(stranger)...).Expect(t, 403, `get volumes.longhorn.io \"v1\"`)
	e.Call(t, "POST", "/v1/volumes/v1?action=detach", "{}", bearer(stranger)...).Expect(t, 403, `update volumes.longhorn.io \"v1\"`)
	e.Call(t, "DELETE", "/v1/volumes/v1", "", bearer(operator)...).Expect(t, 403, `delete volumes.longhorn.io \"v1\"`)
	e.Call(t, "DELETE", "/v1/volumes/v1", "", bearer(stranger)...).Expect(t, 403)
	e.Call(t, "GET", "/v1/nodes", "", bearer(operator)...).Expect(t, 403, "list nodes.longhorn.io")
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":""}`, bearer(operator)...).Expect(t, 403, `update settings.longhorn.io \"backup-target\"`)
	if _, err := e.LH.LonghornV1beta2().Volumes(ns).Get(ctx, "v1", metav1.GetOptions{}); err != nil {
		t.Fatalf("the refused delete removed the volume: %v", err)
	}

	// Websocket streams need list and watch on the resource.
	wsURL := "ws://" + d.APIAddress + "/v1/ws/volumes"
	_, resp, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Authorization": {"Bearer " + stranger}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("stranger's stream: err %v, response %v", err, resp)
	}
	_, resp, err = websocket.DefaultDialer.Dial("ws://"+d.APIAddress+"/v1/ws/nodes", http.Header{"Authorization": {"Bearer " + operator}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("operator's nodes stream: err %v, response %v", err, resp)
	}
	conn, _, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Authorization": {"Bearer " + operator}})
	if err != nil {
		t.Fatalf("operator's stream: %v", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), `"v1"`) {
		t.Fatalf("operator's stream: %q, %v", msg, err)
	}
}
